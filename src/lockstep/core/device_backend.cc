// The device backend registry.
#include "lockstep/core/device_backend.h"

namespace lockstep {
namespace {
DeviceBackend* cuda_backend = nullptr;
}  // namespace

void RegisterDeviceBackend(DeviceType type, DeviceBackend* backend) {
  LOCKSTEP_ENFORCE(type == DeviceType::kCuda, "only CUDA devices have a backend of their own");
  cuda_backend = backend;
}

DeviceBackend* FindDeviceBackend(DeviceType type) {
  return type == DeviceType::kCuda ? cuda_backend : nullptr;
}

DeviceBackend& GetDeviceBackend(DeviceType type) {
  DeviceBackend* backend = FindDeviceBackend(type);
  if (!backend)
    throw InvalidInput(
        "this build of lockstep has no CUDA backend; build it where nvcc, cuDNN and NCCL are installed "
        "(cmake -DLOCKSTEP_CUDA=ON) or use CPU devices (--use_cpu)");
  return *backend;
}

}  // namespace lockstep
