// NcclCommunicator: the collectives of the GPUs of one process through NCCL, one rank per logical device.
// NCCL refuses two ranks on one GPU, so the logical devices must run on distinct GPUs (NcclCanServe);
// MakeCudaCommunicator picks this class or the copy-and-sum path accordingly.
#pragma once

#include <vector>

#include "lockstep/comm/cuda/cuda_communicator.h"

struct ncclComm;  // nccl.h's ncclComm_t is a ncclComm*

namespace lockstep {

class NcclCommunicator : public SingleProcessCudaCommunicator {
 public:
  // Creates one NCCL communicator per device (ncclCommInitAll); throws InvalidInput when two devices share a
  // GPU.
  explicit NcclCommunicator(const std::vector<int>& devices);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  void Allreduce(const std::vector<float*>& buffers, size_t count) override;
  void Broadcast(const std::vector<void*>& buffers, size_t bytes, int root_rank) override;
  void Reduce(const std::vector<float*>& buffers, size_t count) override;

 private:
  std::vector<ncclComm*> comms_;  // rank i, on the GPU of devices()[i]
};

}  // namespace lockstep
