// The factories of cuda_communicator.h: NCCL where it can serve the devices, else copy-and-sum; staging
// across processes.
#include "lockstep/comm/cuda/cuda_communicator.h"

#include <set>

#include "lockstep/comm/cuda/device_sum.h"
#include "lockstep/comm/cuda/nccl_communicator.h"
#include "lockstep/comm/cuda/staged_communicator.h"
#include "lockstep/cuda/cuda_context.h"

namespace lockstep {

bool NcclCanServe(const std::vector<int>& devices, int gpus) {
  // One device needs no collective at all: copy-and-sum does nothing for it, where NCCL would set up a
  // clique.
  if (devices.size() < 2 || gpus <= 0) return false;
  std::set<int> used;
  for (int device : devices) {
    LOCKSTEP_ENFORCE_GE(device, 0, "negative GPU id");
    if (!used.insert(device % gpus).second) return false;
  }
  return true;
}

std::shared_ptr<CudaCommunicator> MakeCudaCommunicator(const std::vector<int>& devices) {
  // Without a GPU (count 0) the copy-and-sum communicator is made all the same: its first collective reports
  // the missing GPU, as every CUDA op does.
  if (NcclCanServe(devices, cuda::CudaContext::DeviceCount()))
    return std::make_shared<NcclCommunicator>(devices);
  return std::make_shared<DeviceSumCommunicator>(devices);
}

std::shared_ptr<CudaCommunicator> MakeCudaCommunicator(std::shared_ptr<CudaCommunicator> local,
                                                       std::shared_ptr<Communicator> across_processes) {
  return std::make_shared<StagedCommunicator>(std::move(local), std::move(across_processes));
}

}  // namespace lockstep
