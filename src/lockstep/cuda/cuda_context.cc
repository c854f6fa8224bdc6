// Per-device CUDA state, and the error messages of the checked calls.
#include "lockstep/cuda/cuda_context.h"

#include <map>

namespace lockstep::cuda {

void ThrowCudaError(const char* library, const char* call, const std::string& message, const char* file,
                    int line) {
  throw Error(fmt::format("{} error: {} ({} at {}:{})", library, message, call, file, line));
}

std::string CudaMessage(cudaError_t status) {
  std::string message = cudaGetErrorString(status);
  if (status == cudaErrorNoKernelImageForDevice || status == cudaErrorUnsupportedPtxVersion) {
    int device = 0, major = 0, minor = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    message += fmt::format(
        " ---> HINT: lockstep was built for CUDA architectures {}, GPU {} is sm_{}{}: rebuild with "
        "-DCMAKE_CUDA_ARCHITECTURES={}{} (or configure on a machine that has the GPU)",
        LOCKSTEP_CUDA_ARCHITECTURES, device, major, minor, major, minor);
  }
  return message;
}

const char* CublasMessage(cublasStatus_t status) { return cublasGetStatusString(status); }

const char* CurandMessage(curandStatus_t status) {
  switch (status) {
    case CURAND_STATUS_ALLOCATION_FAILED:
      return "allocation failed";
    case CURAND_STATUS_LAUNCH_FAILURE:
      return "kernel launch failed";
    case CURAND_STATUS_NOT_INITIALIZED:
      return "generator not initialized";
    default:
      return "cuRAND call failed";
  }
}

int CudaContext::DeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no GPU: not an error of a later call
    return 0;
  }
  return count;
}

CudaContext& CudaContext::Get(int logical_device) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<CudaContext>> contexts;
  std::lock_guard<std::mutex> lock(mutex);
  auto& context = contexts[logical_device];
  if (!context) {
    const int count = DeviceCount();
    if (count == 0)
      throw Error(
          fmt::format("gpu:{} was asked for, but this machine has no CUDA GPU (or no driver); train on "
                      "CPU devices with --use_cpu",
                      logical_device));
    LOCKSTEP_ENFORCE_GE(logical_device, 0, "negative GPU id");
    context.reset(new CudaContext(logical_device, logical_device % count));
  }
  return *context;
}

CudaContext::CudaContext(int logical, int physical) : logical_(logical), physical_(physical) {
  MakeCurrent();
  LOCKSTEP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  LOCKSTEP_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  const int gpu = physical_;
  allocator_ = CachingAllocator::Create(
      fmt::format("gpu:{} (GPU {})", logical, physical),
      [gpu](size_t bytes) -> void* {
        void* pointer = nullptr;
        LOCKSTEP_CUDA_CHECK(cudaSetDevice(gpu));
        if (cudaMalloc(&pointer, bytes) != cudaSuccess) {
          cudaGetLastError();  // out of memory: the allocator empties its cache and retries
          return nullptr;
        }
        return pointer;
      },
      [gpu](void* pointer) {
        cudaSetDevice(gpu);
        cudaFree(pointer);
      });
}

CudaContext::~CudaContext() {
  // Contexts live until the process exits, when the driver may already be shutting down: no checks here.
  cudaSetDevice(physical_);
  if (cublas_) cublasDestroy(cublas_);
  if (cudnn_) cudnnDestroy(cudnn_);
  if (curand_) curandDestroyGenerator(curand_);
  cudaEventDestroy(event_);
  cudaStreamDestroy(stream_);
}

void CudaContext::MakeCurrent() const { LOCKSTEP_CUDA_CHECK(cudaSetDevice(physical_)); }

template <typename Handle, typename Create>
Handle CudaContext::Lazily(Handle* handle, Create create) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!*handle) {
    MakeCurrent();
    create();
  }
  return *handle;
}

cublasHandle_t CudaContext::cublas() {
  return Lazily(&cublas_, [this] {
    LOCKSTEP_CUBLAS_CHECK(cublasCreate(&cublas_));
    LOCKSTEP_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  });
}

cudnnHandle_t CudaContext::cudnn() {
  return Lazily(&cudnn_, [this] {
    LOCKSTEP_CUDNN_CHECK(cudnnCreate(&cudnn_));
    LOCKSTEP_CUDNN_CHECK(cudnnSetStream(cudnn_, stream_));
  });
}

curandGenerator_t CudaContext::curand() {
  return Lazily(&curand_, [this] {
    LOCKSTEP_CURAND_CHECK(curandCreateGenerator(&curand_, CURAND_RNG_PSEUDO_PHILOX4_32_10));
    LOCKSTEP_CURAND_CHECK(curandSetStream(curand_, stream_));
    // Each logical device draws its own sequence (replicas must not drop the same units).
    LOCKSTEP_CURAND_CHECK(curandSetPseudoRandomGeneratorSeed(curand_, 0x10c5u * 1000003u + logical_));
  });
}

void* CudaContext::Workspace(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (bytes > workspace_bytes_) {
    workspace_.reset();
    workspace_ = allocator_->Allocate(bytes);
    workspace_bytes_ = bytes;
  }
  return workspace_.get();
}

void CudaContext::Synchronize() {
  MakeCurrent();
  LOCKSTEP_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaContext::WaitFor(CudaContext& other) {
  if (&other == this) return;
  std::lock_guard<std::mutex> lock(other.mutex_);  // other's event: recorded and waited on together
  other.MakeCurrent();
  LOCKSTEP_CUDA_CHECK(cudaEventRecord(other.event_, other.stream_));
  LOCKSTEP_CUDA_CHECK(cudaStreamWaitEvent(stream_, other.event_, 0));
}

}  // namespace lockstep::cuda
