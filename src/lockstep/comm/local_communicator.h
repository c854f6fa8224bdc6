// The communicator of a single process: sums the local devices' buffers in place.
#pragma once

#include "lockstep/comm/communicator.h"

namespace lockstep {

class LocalCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void Allreduce(const std::vector<float*>& buffers, size_t count) override;
  void Broadcast(const std::vector<void*>& buffers, size_t bytes, int root_rank) override;
};

// Sums buffers[1..k-1] into buffers[0], in that order (the first half of a local Allreduce).
void SumIntoFirst(const std::vector<float*>& buffers, size_t count);

}  // namespace lockstep
