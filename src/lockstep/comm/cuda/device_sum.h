// DeviceSumCommunicator: the copy-and-sum path, for logical CUDA devices that share GPUs (which NCCL
// refuses). Device 0's stream sums the other buffers into its own, then copies the sum into them; events
// order the devices' streams, so the host never waits. It serves any device list, one device included.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "lockstep/comm/cuda/cuda_communicator.h"

namespace lockstep {

class DeviceSumCommunicator : public SingleProcessCudaCommunicator {
 public:
  explicit DeviceSumCommunicator(const std::vector<int>& devices);

  void Allreduce(const std::vector<float*>& buffers, size_t count) override;
  void Broadcast(const std::vector<void*>& buffers, size_t bytes, int root_rank) override;
  void Reduce(const std::vector<float*>& buffers, size_t count) override;

 private:
  // buffers[0] += buffers[1] + ... in that order, on device 0's stream; the caller has ordered the streams.
  void AddOthersIntoFirst(const std::vector<float*>& buffers, size_t count);
  // Device 0's copy of a buffer that lives on another GPU, kept for the next collective (on device 0's stream
  // only, so the caching allocator's stream order covers its reuse).
  float* Scratch(size_t count);

  std::shared_ptr<uint8_t> scratch_;
  size_t scratch_bytes_ = 0;
};

}  // namespace lockstep
