// The copy-and-sum path. Device 0's stream adds the buffers in a fixed order (0, 1, ..., k-1, as
// LocalCommunicator does), so every run gives the same bits; a buffer on another GPU is first copied next to
// device 0's.
#include <algorithm>

#include "lockstep/comm/cuda/device_sum.h"
#include "lockstep/cuda/cuda_context.h"

namespace lockstep {
namespace {

// sum and addend are (n).
__global__ void AddKernel(float* sum, const float* addend, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{blockDim.x} * gridDim.x)
    sum[i] += addend[i];
}

void Add(float* sum, const float* addend, size_t n, cudaStream_t stream) {
  const int threads = 256;
  const size_t blocks = std::min<size_t>((n + threads - 1) / threads, 65535);
  AddKernel<<<blocks, threads, 0, stream>>>(sum, addend, n);
  LOCKSTEP_CUDA_CHECK_LAUNCH();
}

// Device 0's context, current on this thread, once its stream waits for the work queued so far on every other
// device: the ops that wrote their buffers, or last read them before device 0 overwrites them.
cuda::CudaContext& RootAfterOthers(const std::vector<int>& devices) {
  cuda::CudaContext& root = cuda::CudaContext::Get(devices[0]);
  for (size_t i = 1; i < devices.size(); ++i) root.WaitFor(cuda::CudaContext::Get(devices[i]));
  root.MakeCurrent();  // WaitFor leaves the other device current
  return root;
}

// Every other device's stream waits for device 0's work: its later work reads the result, or overwrites a
// buffer, only after device 0 is done with it.
void OthersAfterRoot(const std::vector<int>& devices, cuda::CudaContext& root) {
  for (size_t i = 1; i < devices.size(); ++i) cuda::CudaContext::Get(devices[i]).WaitFor(root);
}

template <typename T>
void CopyFirstToOthers(const std::vector<T*>& buffers, size_t bytes, cudaStream_t stream) {
  for (size_t i = 1; i < buffers.size(); ++i)
    LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(buffers[i], buffers[0], bytes, cudaMemcpyDefault, stream));
}

}  // namespace

DeviceSumCommunicator::DeviceSumCommunicator(const std::vector<int>& devices)
    : SingleProcessCudaCommunicator(devices) {
  LOCKSTEP_ENFORCE(!devices.empty(), "a communicator needs at least one device");
}

void DeviceSumCommunicator::Allreduce(const std::vector<float*>& buffers, size_t count) {
  CheckBuffers(buffers.size(), __func__);
  if (count == 0 || buffers.size() == 1) return;
  cuda::CudaContext& root = RootAfterOthers(devices());
  AddOthersIntoFirst(buffers, count);
  CopyFirstToOthers(buffers, count * sizeof(float), root.stream());
  OthersAfterRoot(devices(), root);
}

void DeviceSumCommunicator::Reduce(const std::vector<float*>& buffers, size_t count) {
  CheckBuffers(buffers.size(), "Reduce");
  if (count == 0 || buffers.size() == 1) return;
  cuda::CudaContext& root = RootAfterOthers(devices());
  AddOthersIntoFirst(buffers, count);
  OthersAfterRoot(devices(), root);
}

void DeviceSumCommunicator::Broadcast(const std::vector<void*>& buffers, size_t bytes, int root_rank) {
  CheckBuffers(buffers.size(), __func__);
  LOCKSTEP_ENFORCE_EQ(root_rank, 0, "a single process is rank 0");
  if (bytes == 0 || buffers.size() == 1) return;
  cuda::CudaContext& root = RootAfterOthers(devices());
  CopyFirstToOthers(buffers, bytes, root.stream());
  OthersAfterRoot(devices(), root);
}

void DeviceSumCommunicator::AddOthersIntoFirst(const std::vector<float*>& buffers, size_t count) {
  cuda::CudaContext& root = cuda::CudaContext::Get(devices()[0]);
  for (size_t i = 1; i < buffers.size(); ++i) {
    const float* addend = buffers[i];
    if (cuda::CudaContext::Get(devices()[i]).physical_device() != root.physical_device()) {
      float* scratch = Scratch(count);
      LOCKSTEP_CUDA_CHECK(
          cudaMemcpyAsync(scratch, addend, count * sizeof(float), cudaMemcpyDefault, root.stream()));
      addend = scratch;
    }
    Add(buffers[0], addend, count, root.stream());
  }
}

float* DeviceSumCommunicator::Scratch(size_t count) {
  const size_t bytes = count * sizeof(float);
  if (bytes > scratch_bytes_) {
    scratch_.reset();  // back to device 0's cache, behind the work already queued on its stream
    scratch_ = cuda::CudaContext::Get(devices()[0]).allocator().Allocate(bytes);
    scratch_bytes_ = bytes;
  }
  return reinterpret_cast<float*>(scratch_.get());
}

}  // namespace lockstep
