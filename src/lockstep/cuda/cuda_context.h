// What one logical CUDA device needs: its physical GPU, its stream (all its work is queued there, in order),
// cuBLAS, cuDNN and cuRAND handles bound to that stream, a scratch workspace and a caching allocator. Logical
// device d runs on GPU d % (number of GPUs), so several logical devices may share one GPU, each with a stream
// of its own; that is how the data-parallel path runs on a machine with one GPU.
#pragma once

#include <memory>
#include <mutex>

#include "lockstep/core/caching_allocator.h"
#include "lockstep/cuda/cuda_check.h"

namespace lockstep::cuda {

class CudaContext {
 public:
  // The context of a logical device, created on first use; throws Error when there is no GPU.
  static CudaContext& Get(int logical_device);
  // Physical GPUs visible (0 without a driver or a GPU).
  static int DeviceCount();

  ~CudaContext();
  int logical_device() const { return logical_; }
  int physical_device() const { return physical_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas();
  cudnnHandle_t cudnn();
  curandGenerator_t curand();
  // Scratch device memory of at least `bytes`, kept for the next caller; valid until then (callers are the
  // operators of this device, which run one at a time).
  void* Workspace(size_t bytes);
  CachingAllocator& allocator() { return *allocator_; }
  // Makes the context's GPU the calling thread's current device, as the runtime API calls need.
  void MakeCurrent() const;
  void Synchronize();
  // Makes this context's stream wait for the work queued so far on `other`'s stream (no host wait).
  void WaitFor(CudaContext& other);

 private:
  CudaContext(int logical, int physical);
  // *handle, which `create` makes on this context's GPU on first use.
  template <typename Handle, typename Create>
  Handle Lazily(Handle* handle, Create create);

  int logical_, physical_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t event_ = nullptr;
  std::mutex mutex_;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  curandGenerator_t curand_ = nullptr;
  std::shared_ptr<uint8_t> workspace_;
  size_t workspace_bytes_ = 0;
  std::shared_ptr<CachingAllocator> allocator_;
};

// The stream and handles of the device an operator runs on, made current for the calling thread.
inline CudaContext& ContextFor(int logical_device) {
  CudaContext& context = CudaContext::Get(logical_device);
  context.MakeCurrent();
  return context;
}

}  // namespace lockstep::cuda
