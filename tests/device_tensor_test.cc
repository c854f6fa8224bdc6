// Tensors in device memory, through a stand-in backend whose "device memory" is host memory: allocation,
// copies in both directions, zeroing, moving between memories, and CPU operators reading device tensors.
#include <gtest/gtest.h>

#include <cstring>

#include "lockstep/core/device_backend.h"
#include "lockstep/core/operator.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

class HostBackedDevice : public DeviceBackend {
 public:
  int DeviceCount() override { return 1; }
  std::shared_ptr<uint8_t> Allocate(int device, size_t bytes) override {
    ++allocations;
    return std::shared_ptr<uint8_t>(new uint8_t[bytes], std::default_delete<uint8_t[]>());
  }
  void Copy(void* dst, const Device& dst_device, const void* src, const Device& src_device,
            size_t bytes) override {
    ++copies;
    last_copy = {src_device, dst_device};
    std::memcpy(dst, src, bytes);
  }
  void Zero(int device, void* dst, size_t bytes) override {
    ++zeros;
    std::memset(dst, 0, bytes);
  }
  void Synchronize(int device) override {}
  size_t MemoryBytes(int device) override { return size_t{1} << 30; }
  int allocations = 0, copies = 0, zeros = 0;
  std::pair<Device, Device> last_copy;
};

// Installs the stand-in for one test and puts back whatever backend the build has.
class DeviceTensor : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = FindDeviceBackend(DeviceType::kCuda);
    RegisterDeviceBackend(DeviceType::kCuda, &device_);
  }
  void TearDown() override { RegisterDeviceBackend(DeviceType::kCuda, saved_); }
  HostBackedDevice device_;
  DeviceBackend* saved_ = nullptr;
};

const Device kGpu0{DeviceType::kCuda, 0}, kGpu1{DeviceType::kCuda, 1};

TEST_F(DeviceTensor, CopiesRoundTripThroughDeviceMemory) {
  Tensor host = TensorFromValues({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor gpu;
  gpu.PlaceOn(kGpu0);
  gpu.CopyFrom(host);
  EXPECT_EQ(gpu.device(), kGpu0);
  EXPECT_EQ(device_.allocations, 1);
  EXPECT_EQ(device_.last_copy, std::make_pair(Device{}, kGpu0));
  Tensor other_gpu;
  other_gpu.PlaceOn(kGpu1);
  other_gpu.CopyFrom(gpu);
  EXPECT_EQ(device_.last_copy, std::make_pair(kGpu0, kGpu1));
  Tensor back;
  back.CopyFrom(other_gpu);
  EXPECT_TRUE(back.on_host());
  EXPECT_EQ(Values(back), Values(host));
  EXPECT_EQ(device_.copies, 3);
  other_gpu.Zero();
  EXPECT_EQ(device_.zeros, 1);
}

TEST_F(DeviceTensor, PlacingOnOtherMemoryDropsTheBufferAndTheSameKeepsIt) {
  Tensor t({4}, DataType::kFloat);
  const void* host_buffer = t.raw_data();
  t.PlaceOn({DeviceType::kCpu, 3});  // every CPU device shares host memory
  EXPECT_EQ(t.raw_data(), host_buffer);
  t.PlaceOn(kGpu0);
  EXPECT_EQ(t.capacity(), 0u);
  t.Resize({4});
  EXPECT_EQ(device_.allocations, 1);
  t.Resize({2});
  EXPECT_EQ(device_.allocations, 1) << "a smaller shape keeps the device buffer";
}

TEST_F(DeviceTensor, ACpuOperatorReadsADeviceTensorThroughAHostCopy) {
  Workspace ws;
  Tensor* x = ws.CreateBlob("x");
  x->PlaceOn(kGpu0);
  x->CopyFrom(TensorFromValues({4}, {-1, 2, -3, 4}));
  RunOp(&ws, MakeOperatorDef("Relu", {"x"}, {"y"}));
  EXPECT_TRUE(ws.Blob("y").on_host());
  EXPECT_EQ(Values(ws.Blob("y")), (std::vector<float>{0, 2, 0, 4}));
  EXPECT_EQ(device_.last_copy, std::make_pair(kGpu0, Device{}));
}

TEST_F(DeviceTensor, CopyToADeviceCopiesOnceStraightFromTheSource) {
  Workspace ws;
  Feed(&ws, "x", TensorFromValues({3}, {1, 2, 3}));
  OperatorDef copy = MakeOperatorDef("Copy", {"x"}, {"y"});
  SetDevice(&copy, kGpu0);
  RunOp(&ws, copy);
  EXPECT_EQ(ws.Blob("y").device(), kGpu0);
  EXPECT_EQ(device_.copies, 1) << "no staging copy before the copy itself";
  EXPECT_EQ(device_.last_copy, std::make_pair(Device{}, kGpu0));
  Tensor back;
  back.CopyFrom(ws.Blob("y"));
  EXPECT_EQ(Values(back), (std::vector<float>{1, 2, 3}));
}

TEST(DeviceBackendRegistry, ACudaTensorWithoutABackendIsAClearError) {
  DeviceBackend* saved = FindDeviceBackend(DeviceType::kCuda);
  RegisterDeviceBackend(DeviceType::kCuda, nullptr);
  Tensor t;
  t.PlaceOn(kGpu0);
  try {
    t.Resize({2});
    ADD_FAILURE() << "no error";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("this build of lockstep has no CUDA backend"), std::string::npos);
  }
  RegisterDeviceBackend(DeviceType::kCuda, saved);
}

}  // namespace
}  // namespace lockstep::testing
