// Collectives over buffers in CUDA device memory, and the factories that pick an implementation. The header
// names no CUDA type, so code outside the CUDA library may include it; only that library defines its
// functions.
#pragma once

#include <memory>
#include <vector>

#include "lockstep/comm/communicator.h"
#include "lockstep/core/enforce.h"

namespace lockstep {

// A Communicator whose buffer i is in the memory of logical CUDA device devices()[i]. A collective returns
// once its work is queued on the devices' streams, behind the work already queued there (the ops that wrote
// the buffers); the work queued on those streams afterwards sees its result. The host never waits, except
// where a collective crosses processes through host memory.
class CudaCommunicator : public Communicator {
 public:
  explicit CudaCommunicator(std::vector<int> devices) : devices_(std::move(devices)) {}
  const std::vector<int>& devices() const { return devices_; }
  // Leaves the sum of every buffer of every process in buffers[0] (the first half of an Allreduce); the other
  // buffers keep their values.
  virtual void Reduce(const std::vector<float*>& buffers, size_t count) = 0;

 protected:
  // Every collective takes one buffer per device, in the order of devices().
  void CheckBuffers(size_t buffers, const char* collective) const {
    LOCKSTEP_ENFORCE_EQ(buffers, devices_.size(), "{} takes one buffer per device of the communicator",
                        collective);
  }

 private:
  std::vector<int> devices_;
};

// A CudaCommunicator over the devices of this process alone, which is therefore rank 0 of 1: NCCL's and the
// copy-and-sum path's (StagedCommunicator is the one that spans processes).
class SingleProcessCudaCommunicator : public CudaCommunicator {
 public:
  using CudaCommunicator::CudaCommunicator;
  int rank() const override { return 0; }
  int size() const override { return 1; }
};

// Whether NCCL can serve these logical devices on a machine with `gpus` GPUs: two or more devices, and no two
// on the same GPU (logical device d runs on GPU d % gpus; NCCL takes one rank per GPU).
bool NcclCanServe(const std::vector<int>& devices, int gpus);

// The communicator of logical CUDA devices `devices` (e.g. {0, 1}) of this process: NCCL where NcclCanServe,
// else the copy-and-sum path (device_sum.h), which serves several logical devices on one GPU.
std::shared_ptr<CudaCommunicator> MakeCudaCommunicator(const std::vector<int>& devices);

// The same devices in a job of several processes: sums over the devices through `local`, over the processes
// through `across_processes` (a connected GlooCommunicator, which works on host memory) with device 0's sum
// staged through host memory; see staged_communicator.h. rank() and size() are across_processes'.
std::shared_ptr<CudaCommunicator> MakeCudaCommunicator(std::shared_ptr<CudaCommunicator> local,
                                                       std::shared_ptr<Communicator> across_processes);

}  // namespace lockstep
