// The three stages of a collective across processes. Device 0's sum goes to a pinned host buffer with a copy
// the host waits for (the network reads it) and comes back with a copy it does not wait for: the host buffer
// is written next only after the next wait on device 0's stream, which is queued behind that copy.
#include "lockstep/comm/cuda/staged_communicator.h"

#include "lockstep/cuda/cuda_context.h"

namespace lockstep {
namespace {

const std::vector<int>& DevicesOf(const std::shared_ptr<CudaCommunicator>& local) {
  LOCKSTEP_ENFORCE(local != nullptr, "a staged communicator needs the communicator of the local devices");
  LOCKSTEP_ENFORCE_EQ(local->size(), 1, "the local communicator must serve this process only");
  return local->devices();
}

}  // namespace

StagedCommunicator::StagedCommunicator(std::shared_ptr<CudaCommunicator> local,
                                       std::shared_ptr<Communicator> across_processes)
    : CudaCommunicator(DevicesOf(local)), local_(std::move(local)), across_(std::move(across_processes)) {
  LOCKSTEP_ENFORCE(across_ != nullptr, "a staged communicator needs the communicator across processes");
}

StagedCommunicator::~StagedCommunicator() {
  // The last copy back from a host buffer may still be queued. A destructor must not throw, and at exit the
  // driver may already be shutting down: unchecked, as in CudaContext's destructor.
  if (copied_) {
    cudaStreamSynchronize(cuda::CudaContext::Get(devices()[0]).stream());
    cudaEventDestroy(copied_);
  }
  for (const auto& entry : host_buffers_) cudaFreeHost(entry.second);
}

void StagedCommunicator::Reduce(const std::vector<float*>& buffers, size_t count) {
  ReduceOverWire(buffers, count, DataType::kFloat);
}

void StagedCommunicator::ReduceOverWire(const std::vector<float*>& buffers, size_t count, DataType wire) {
  CheckBuffers(buffers.size(), "Reduce");
  if (count == 0) return;
  local_->Reduce(buffers, count);
  const size_t bytes = count * sizeof(float);
  float* host = HostBuffer(buffers[0], count);
  cuda::CudaContext& root = cuda::ContextFor(devices()[0]);
  LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(host, buffers[0], bytes, cudaMemcpyDeviceToHost, root.stream()));
  WaitForDevice0();
  across_->AllreduceOverWire({host}, count, wire);
  LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(buffers[0], host, bytes, cudaMemcpyHostToDevice, root.stream()));
}

void StagedCommunicator::Allreduce(const std::vector<float*>& buffers, size_t count) {
  AllreduceOverWire(buffers, count, DataType::kFloat);
}

void StagedCommunicator::AllreduceOverWire(const std::vector<float*>& buffers, size_t count, DataType wire) {
  ReduceOverWire(buffers, count, wire);
  local_->Broadcast(std::vector<void*>(buffers.begin(), buffers.end()), count * sizeof(float), 0);
}

void StagedCommunicator::Broadcast(const std::vector<void*>& buffers, size_t bytes, int root_rank) {
  CheckBuffers(buffers.size(), __func__);
  if (bytes == 0) return;
  cuda::CudaContext& root = cuda::ContextFor(devices()[0]);
  // Broadcasts are rare (the start of a run, a checkpoint load): a host buffer of their own.
  std::vector<uint8_t> host(bytes);
  if (rank() == root_rank) {
    LOCKSTEP_CUDA_CHECK(
        cudaMemcpyAsync(host.data(), buffers[0], bytes, cudaMemcpyDeviceToHost, root.stream()));
    WaitForDevice0();
  }
  across_->Broadcast({host.data()}, bytes, root_rank);
  if (rank() != root_rank) {
    LOCKSTEP_CUDA_CHECK(
        cudaMemcpyAsync(buffers[0], host.data(), bytes, cudaMemcpyHostToDevice, root.stream()));
    WaitForDevice0();  // the host buffer goes away on return
  }
  local_->Broadcast(buffers, bytes, 0);
}

float* StagedCommunicator::HostBuffer(const float* device_buffer, size_t count) {
  float*& host = host_buffers_[{device_buffer, count}];
  if (!host) {
    void* memory = nullptr;
    LOCKSTEP_CUDA_CHECK(cudaMallocHost(&memory, count * sizeof(float)));
    host = static_cast<float*>(memory);
  }
  return host;
}

void StagedCommunicator::WaitForDevice0() {
  cuda::CudaContext& root = cuda::ContextFor(devices()[0]);
  if (!copied_) LOCKSTEP_CUDA_CHECK(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming));
  LOCKSTEP_CUDA_CHECK(cudaEventRecord(copied_, root.stream()));
  LOCKSTEP_CUDA_CHECK(cudaEventSynchronize(copied_));
}

}  // namespace lockstep
