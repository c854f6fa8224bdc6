// NcclCommunicator: the collectives of the GPUs of one process through NCCL, one rank per logical device.
// NCCL refuses two ranks on one GPU, so the logical devices must run on distinct GPUs (NcclCanServe);
// MakeCudaCommunicator picks this class or the copy-and-sum path accordingly.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
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
  // NCCL's own bfloat16 / float16 sum (each step adds in float32 and rounds, as comm/wire_dtype.h's hops do)
  // on a 16-bit copy of each buffer; float16 first agrees on its scale with a one-float ncclMax.
  void AllreduceOverWire(const std::vector<float*>& buffers, size_t count, DataType wire) override;
  void Broadcast(const std::vector<void*>& buffers, size_t bytes, int root_rank) override;
  void Reduce(const std::vector<float*>& buffers, size_t count) override;

 private:
  std::vector<ncclComm*> comms_;  // rank i, on the GPU of devices()[i]
  // A bucket's 16-bit copies and float16 scales, one per device in its memory: made on first use and kept.
  struct Wire {
    std::vector<std::shared_ptr<uint8_t>> values, scales;
  };
  std::map<std::tuple<const float*, size_t, DataType>, Wire> wires_;
};

}  // namespace lockstep
