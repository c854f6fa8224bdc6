// The CUDA device backend: tensors in GPU memory through each logical device's caching allocator, copies
// ordered with the devices' streams. Registered when the library loads.
#include "lockstep/core/device_backend.h"
#include "lockstep/cuda/cuda_context.h"

namespace lockstep::cuda {
namespace {

class CudaBackend : public DeviceBackend {
 public:
  int DeviceCount() override { return CudaContext::DeviceCount(); }

  std::shared_ptr<uint8_t> Allocate(int device, size_t bytes) override {
    return CudaContext::Get(device).allocator().Allocate(bytes);
  }

  void Copy(void* dst, const Device& dst_device, const void* src, const Device& src_device,
            size_t bytes) override {
    const bool from_host = src_device.type == DeviceType::kCpu, to_host = dst_device.type == DeviceType::kCpu;
    LOCKSTEP_ENFORCE(!(from_host && to_host), "a host-to-host copy reached the CUDA backend");
    if (to_host) {  // after the work that wrote src; the host reads dst when this returns
      CudaContext& source = ContextFor(src_device.id);
      LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, source.stream()));
      source.Synchronize();
      return;
    }
    CudaContext& target = ContextFor(dst_device.id);
    if (from_host) {  // from pageable memory: the host buffer is free again when this returns
      LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, target.stream()));
      return;
    }
    // Device to device, across streams: the copy waits for the writer of src, and the source device's later
    // work (which may overwrite src) waits for the copy.
    CudaContext& source = CudaContext::Get(src_device.id);
    target.WaitFor(source);
    target.MakeCurrent();
    LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, target.stream()));
    source.WaitFor(target);
  }

  void Zero(int device, void* dst, size_t bytes) override {
    CudaContext& context = ContextFor(device);
    LOCKSTEP_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, context.stream()));
  }

  void Synchronize(int device) override { CudaContext::Get(device).Synchronize(); }

  size_t MemoryBytes(int device) override {
    CudaContext::Get(device).MakeCurrent();
    size_t free = 0, total = 0;
    LOCKSTEP_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    return total;
  }
};

CudaBackend backend;
const bool registered [[maybe_unused]] = (RegisterDeviceBackend(DeviceType::kCuda, &backend), true);

}  // namespace
}  // namespace lockstep::cuda
