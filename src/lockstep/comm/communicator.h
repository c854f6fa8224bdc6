// Communicator: the collectives the data-parallel planner needs, over every replica of a job. A member
// process holds one buffer per local device; Allreduce sums element-wise over all buffers of all members and
// leaves the sum in every buffer, Broadcast copies the root's first buffer into all others. Every member
// issues the same collectives in the same order with the same counts. Implementations: LocalCommunicator
// (the devices of one process); Gloo across processes and NCCL across GPUs build on the same interface.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "lockstep/core/enforce.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;  // this process among size()
  virtual int size() const = 0;
  virtual void Allreduce(const std::vector<float*>& buffers, size_t count) = 0;
  // Allreduce whose sums cross the links between processes (Gloo) or GPUs (NCCL) as `wire` values
  // (kFloat, kBFloat16 or kFloat16; comm/wire_dtype.h): 16 bits halve the bytes sent, and every hop adds in
  // float32 before rounding back. The local devices' sum and the result stay float32. A communicator whose
  // collectives cross no link (a single process: LocalCommunicator, copy-and-sum) sums in float32 exactly.
  virtual void AllreduceOverWire(const std::vector<float*>& buffers, size_t count, DataType wire) {
    LOCKSTEP_ENFORCE(wire == DataType::kFloat || size() == 1,
                     "this communicator sends float32 only; a {} wire needs Gloo or NCCL",
                     DataTypeName(wire));
    Allreduce(buffers, count);
  }
  // Copies `bytes` bytes (any dtype).
  virtual void Broadcast(const std::vector<void*>& buffers, size_t bytes, int root_rank) = 0;
  // Channel k >= 1: a communicator over the same members whose collectives may run at the same time as this
  // one's and other channels', each channel keeping its own order; every member opens the same channels.
  // Made once and kept. nullptr where the implementation has none: its collectives then share this one.
  virtual std::shared_ptr<Communicator> Channel(int /*k*/) { return nullptr; }
};

}  // namespace lockstep
