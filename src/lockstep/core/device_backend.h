// Device backends: what the core needs from a device whose memory is not the host's (CUDA). The backend
// registers itself when its library is linked; the core stays free of its headers. Work on a device is
// queued in order on that device's stream; Synchronize waits for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "lockstep/core/tensor.h"

namespace lockstep {

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  // Devices present (logical ids may exceed it: several logical devices share a physical one).
  virtual int DeviceCount() = 0;
  // `bytes` of `device`'s memory, returned to the backend when the last owner lets go.
  virtual std::shared_ptr<uint8_t> Allocate(int device, size_t bytes) = 0;
  // Copies between any two memories (host or this backend's devices), in order with the work already
  // queued on both devices; a copy to host memory has completed when it returns.
  virtual void Copy(void* dst, const Device& dst_device, const void* src, const Device& src_device,
                    size_t bytes) = 0;
  virtual void Zero(int device, void* dst, size_t bytes) = 0;
  virtual void Synchronize(int device) = 0;
  // Bytes of memory the device has (a GPU's total), for the memory plan's limit.
  virtual size_t MemoryBytes(int device) = 0;
};

// Registers the backend of a device type (called once, by the backend's library).
void RegisterDeviceBackend(DeviceType type, DeviceBackend* backend);
// The backend of `type`, or nullptr when this build has none.
DeviceBackend* FindDeviceBackend(DeviceType type);
// The backend of `type`; throws InvalidInput naming the missing backend and how to get it.
DeviceBackend& GetDeviceBackend(DeviceType type);

}  // namespace lockstep
