// StagedCommunicator: CUDA devices in a job of several processes. The network communicator (Gloo) works on
// host memory, so a collective runs in three stages: the local devices' sum on device 0, device 0's buffer
// through a host buffer and the processes' collective, then the local broadcast from device 0. As with Gloo
// on the CPU, every process must present new device buffers at the same collectives (a new one gets a host
// buffer and a Gloo algorithm of its own); the gradient buckets of the Allreduce op do, being made in the
// first step.
#pragma once

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "lockstep/comm/cuda/cuda_communicator.h"

struct CUevent_st;  // cuda_runtime.h's cudaEvent_t is a CUevent_st*

namespace lockstep {

class StagedCommunicator : public CudaCommunicator {
 public:
  // local: the devices of this process (MakeCudaCommunicator); across_processes: one host buffer per process,
  // e.g. a connected GlooCommunicator.
  StagedCommunicator(std::shared_ptr<CudaCommunicator> local, std::shared_ptr<Communicator> across_processes);
  ~StagedCommunicator() override;

  int rank() const override { return across_->rank(); }
  int size() const override { return across_->size(); }
  void Allreduce(const std::vector<float*>& buffers, size_t count) override;
  // The processes' stage crosses the network in `wire` (across_processes narrows the host buffer); the local
  // stages stay float32.
  void AllreduceOverWire(const std::vector<float*>& buffers, size_t count, DataType wire) override;
  void Broadcast(const std::vector<void*>& buffers, size_t bytes, int root_rank) override;
  void Reduce(const std::vector<float*>& buffers, size_t count) override;

 private:
  // The pinned host buffer that stages device buffer `device_buffer` of `count` floats, made on first use and
  // kept: the Gloo communicator builds its algorithms for a host buffer once and reuses them, so each device
  // buffer (a gradient bucket) keeps its own host buffer, and the steady-state step allocates nothing.
  float* HostBuffer(const float* device_buffer, size_t count);
  // Reduce with the processes' stage in `wire`.
  void ReduceOverWire(const std::vector<float*>& buffers, size_t count, DataType wire);
  // Blocks until device 0 has done the work queued on its stream so far (a copy that the host reads or reuses
  // next), and not the work that its ops queue after it.
  void WaitForDevice0();

  std::shared_ptr<CudaCommunicator> local_;
  std::shared_ptr<Communicator> across_;
  std::map<std::pair<const float*, size_t>, float*> host_buffers_;
  CUevent_st* copied_ = nullptr;  // on device 0, made on first use
};

}  // namespace lockstep
