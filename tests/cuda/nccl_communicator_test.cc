// CUDA communicators (skipped without a GPU): the factory's choice sums 1, 2 and 4 logical devices exactly
// and broadcasts; NCCL itself on the distinct GPUs there are; staging through a host communicator, in one
// process and across two shards over Gloo; the Allreduce and Broadcast ops on device buffers, through the
// communicator that CreateCommonWorld makes. The 16-bit wire (NCCL's bfloat16 / float16, and Gloo's across
// staged shards) sums these small integers exactly too, and the device's narrowing matches the host's bits.
#include "lockstep/comm/cuda/nccl_communicator.h"

#include <iterator>
#include <numeric>

#include "lockstep/comm/cuda/cuda_communicator.h"
#include "lockstep/comm/cuda/wire_cast.h"
#include "lockstep/comm/gloo_communicator.h"
#include "lockstep/comm/local_communicator.h"
#include "lockstep/comm/wire_dtype.h"
#include "lockstep/core/device_backend.h"
#include "lockstep/cuda/cuda_context.h"
#include "lockstep/ops/op_defs.h"
#include "shards.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

// The machine's GPUs; none without a CUDA backend.
int GpuCount() {
  DeviceBackend* cuda = FindDeviceBackend(DeviceType::kCuda);
  return cuda ? cuda->DeviceCount() : 0;
}

std::vector<int> FirstDevices(int n) {
  std::vector<int> devices(n);
  std::iota(devices.begin(), devices.end(), 0);
  return devices;
}

// Small integers, so that every sum is exact in whatever order it is added.
float Value(int shard, int device, size_t i, int round) {
  return static_cast<float>(static_cast<int>((i * 7 + shard * 13 + device * 5 + round * 3) % 19) - 9);
}

// Fills `buffer` (in the memory of logical device `device`) with `count` floats Value(shard, device, .,
// round), in the buffer it already has if that is large enough.
void Fill(Tensor* buffer, int shard, int device, size_t count, int round) {
  Tensor host({static_cast<int64_t>(count)}, DataType::kFloat);
  for (size_t i = 0; i < count; ++i) host.data<float>()[i] = Value(shard, device, i, round);
  buffer->PlaceOn({DeviceType::kCuda, device});
  buffer->CopyFrom(host);
}

std::vector<float*> Pointers(std::vector<Tensor>& buffers) {
  std::vector<float*> pointers;
  for (auto& buffer : buffers) pointers.push_back(buffer.data<float>());
  return pointers;
}

// Checks buffer b (device devices[b]) of this shard against the sum over every shard's devices (shard s has
// devices_of_shard[s]), or against the buffer's own values when it was left alone.
void ExpectSums(const std::vector<Tensor>& buffers, const std::vector<std::vector<int>>& devices_of_shard,
                int shard, int round, size_t summed_buffers) {
  const std::vector<int>& mine = devices_of_shard[shard];
  for (size_t b = 0; b < buffers.size(); ++b) {
    std::vector<float> values = Values(buffers[b]);
    for (size_t i = 0; i < values.size(); ++i) {
      float expected = 0;
      if (b < summed_buffers)
        for (size_t s = 0; s < devices_of_shard.size(); ++s)
          for (int device : devices_of_shard[s]) expected += Value(s, device, i, round);
      else
        expected = Value(shard, mine[b], i, round);
      if (values[i] != expected) {  // one report per buffer, not one per element
        EXPECT_EQ(values[i], expected)
            << "gpu:" << mine[b] << " element " << i << " of " << values.size() << ", round " << round;
        break;
      }
    }
  }
}

// Allreduces (or Reduces) buffers of sizes 0, 1, odd and large, twice each, as gradient buckets: the same
// buffers every time (a staged communicator keeps a host buffer, and Gloo an algorithm, per device buffer, so
// every shard must present new buffers at the same collectives). A 16-bit wire carries the sums of these
// small integers exactly: bfloat16 holds integers to 256, float16 to 2048, and float16's scale is a power of
// two.
void SumAndCheck(CudaCommunicator& communicator, const std::vector<std::vector<int>>& devices_of_shard,
                 int shard, bool reduce_only, DataType wire = DataType::kFloat) {
  const std::vector<int>& devices = devices_of_shard[shard];
  const size_t counts[] = {0, 1, 1001, (1 << 20) + 3};
  std::vector<std::vector<Tensor>> kept(std::size(counts), std::vector<Tensor>(devices.size()));
  int round = 0;
  for (int repeat = 0; repeat < 2; ++repeat)
    for (size_t c = 0; c < std::size(counts); ++c) {
      const size_t count = counts[c];
      std::vector<Tensor>& buffers = kept[c];
      for (size_t d = 0; d < devices.size(); ++d) Fill(&buffers[d], shard, devices[d], count, round);
      if (reduce_only)
        communicator.Reduce(Pointers(buffers), count);
      else
        communicator.AllreduceOverWire(Pointers(buffers), count, wire);
      ExpectSums(buffers, devices_of_shard, shard, round, reduce_only ? 1 : buffers.size());
      ++round;
    }
}

// Broadcasts byte buffers of odd sizes from buffer 0 of shard `root` and checks that every buffer holds them.
void BroadcastAndCheck(CudaCommunicator& communicator, int shard, int root) {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{7}, size_t{(1 << 20) + 5}}) {
    std::vector<Tensor> buffers;
    std::vector<void*> pointers;
    for (size_t d = 0; d < communicator.devices().size(); ++d) {
      Tensor host({static_cast<int64_t>(bytes)}, DataType::kUInt8);
      for (size_t i = 0; i < bytes; ++i)
        host.data<uint8_t>()[i] = static_cast<uint8_t>(i * 31 + shard * 7 + d);
      buffers.emplace_back();
      buffers.back().PlaceOn({DeviceType::kCuda, communicator.devices()[d]});
      buffers.back().CopyFrom(host);
      pointers.push_back(buffers.back().raw_data());
    }
    communicator.Broadcast(pointers, bytes, root);
    for (size_t d = 0; d < buffers.size(); ++d) {
      Tensor host;
      host.CopyFrom(buffers[d]);
      for (size_t i = 0; i < bytes; ++i)
        if (host.data<uint8_t>()[i] != static_cast<uint8_t>(i * 31 + root * 7)) {
          EXPECT_EQ(host.data<uint8_t>()[i], static_cast<uint8_t>(i * 31 + root * 7))
              << "buffer " << d << " byte " << i << " of " << bytes;
          break;
        }
    }
  }
}

TEST(CudaCommunicator, FactorySumsOneTwoAndFourLogicalDevicesExactly) {
  if (GpuCount() == 0) GTEST_SKIP() << "no GPU";
  for (int n : {1, 2, 4}) {
    SCOPED_TRACE(fmt::format("{} logical devices", n));
    auto communicator = MakeCudaCommunicator(FirstDevices(n));
    EXPECT_EQ(communicator->rank(), 0);
    EXPECT_EQ(communicator->size(), 1);
    SumAndCheck(*communicator, {FirstDevices(n)}, 0, false);
    SumAndCheck(*communicator, {FirstDevices(n)}, 0, true);
  }
}

TEST(CudaCommunicator, FactoryBroadcastsFromDeviceZero) {
  if (GpuCount() == 0) GTEST_SKIP() << "no GPU";
  for (int n : {1, 2, 4}) {
    SCOPED_TRACE(fmt::format("{} logical devices", n));
    auto communicator = MakeCudaCommunicator(FirstDevices(n));
    BroadcastAndCheck(*communicator, 0, 0);
    std::vector<void*> pointers(n, nullptr);
    EXPECT_THROW(communicator->Broadcast(pointers, 4, 1), Error) << "a single process is rank 0";
  }
}

TEST(CudaCommunicator, NcclServesDistinctGpusOnly) {
  if (GpuCount() == 0) GTEST_SKIP() << "no GPU";
  EXPECT_FALSE(NcclCanServe({0}, 1)) << "one device needs no collective";
  EXPECT_FALSE(NcclCanServe({0, 1}, 1));
  EXPECT_TRUE(NcclCanServe({0, 1}, 2));
  EXPECT_FALSE(NcclCanServe({0, 2}, 2)) << "gpu:0 and gpu:2 share GPU 0";
  EXPECT_TRUE(NcclCanServe({1, 2, 3, 4}, 4));
  EXPECT_FALSE(NcclCanServe({0, 1}, 0)) << "no GPU";
  const int gpus = GpuCount();
  EXPECT_THROW(NcclCommunicator({0, gpus}), InvalidInput) << "two ranks on GPU 0";
}

// NCCL itself, on as many distinct GPUs as there are (up to 4; one GPU makes a clique of one rank).
TEST(CudaCommunicator, NcclSumsAndBroadcastsOnDistinctGpus) {
  if (GpuCount() == 0) GTEST_SKIP() << "no GPU";
  const int n = std::min(GpuCount(), 4);
  NcclCommunicator communicator(FirstDevices(n));
  SumAndCheck(communicator, {FirstDevices(n)}, 0, false);
  SumAndCheck(communicator, {FirstDevices(n)}, 0, true);
  BroadcastAndCheck(communicator, 0, 0);
  for (DataType wire : {DataType::kBFloat16, DataType::kFloat16}) {
    SCOPED_TRACE(DataTypeName(wire));
    SumAndCheck(communicator, {FirstDevices(n)}, 0, false, wire);
  }
}

// The kernels that narrow for NCCL round as the host's NarrowToWire does, bit for bit, and widen exactly.
TEST(CudaCommunicator, DeviceNarrowingMatchesTheHostsBits) {
  if (GpuCount() == 0) GTEST_SKIP() << "no GPU";
  const size_t count = 100003;
  Tensor host({static_cast<int64_t>(count)}, DataType::kFloat);
  for (size_t i = 0; i < count; ++i)
    host.data<float>()[i] = std::ldexp(static_cast<float>(static_cast<int>(i * 2654435761u % 20001) - 10000),
                                       -static_cast<int>(i % 30));
  Tensor values, wire_bits, scale;
  values.PlaceOn({DeviceType::kCuda, 0});
  values.CopyFrom(host);
  wire_bits.PlaceOn({DeviceType::kCuda, 0});
  wire_bits.Resize({static_cast<int64_t>(count)}, DataType::kFloat16);
  scale.PlaceOn({DeviceType::kCuda, 0});
  scale.Resize({1}, DataType::kFloat);
  cudaStream_t stream = cuda::ContextFor(0).stream();
  for (DataType wire : {DataType::kBFloat16, DataType::kFloat16}) {
    const float* device_scale = nullptr;
    float host_scale = 1;
    if (wire == DataType::kFloat16) {
      MaxAbsOnDevice(values.data<float>(), count, scale.data<float>(), stream);
      Float16ScaleOnDevice(scale.data<float>(), 3, stream);
      device_scale = scale.data<float>();
      host_scale = Float16WireScale(MaxAbs(host.data<float>(), count), 3);
    }
    NarrowOnDevice(values.data<float>(), count, wire, device_scale, wire_bits.raw_data(), stream);
    std::vector<uint16_t> expected(count), got(count);
    NarrowToWire(host.data<float>(), count, wire, host_scale, expected.data());
    LOCKSTEP_CUDA_CHECK(
        cudaMemcpyAsync(got.data(), wire_bits.raw_data(), count * 2, cudaMemcpyDeviceToHost, stream));
    LOCKSTEP_CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_EQ(got, expected) << DataTypeName(wire);
    Tensor widened;
    widened.PlaceOn({DeviceType::kCuda, 0});
    widened.Resize({static_cast<int64_t>(count)}, DataType::kFloat);
    WidenOnDevice(wire_bits.raw_data(), count, wire, device_scale, widened.data<float>(), stream);
    std::vector<float> want(count);
    WidenFromWire(expected.data(), count, wire, host_scale, want.data());
    EXPECT_EQ(Values(widened), want) << DataTypeName(wire);
  }
}

// The staging path within one process: the host communicator of a single process adds nothing, so the
// results are the local ones, through host memory.
TEST(CudaCommunicator, StagingThroughAHostCommunicatorKeepsTheSums) {
  if (GpuCount() == 0) GTEST_SKIP() << "no GPU";
  for (int n : {1, 2, 4}) {
    SCOPED_TRACE(fmt::format("{} logical devices", n));
    auto communicator =
        MakeCudaCommunicator(MakeCudaCommunicator(FirstDevices(n)), std::make_shared<LocalCommunicator>());
    SumAndCheck(*communicator, {FirstDevices(n)}, 0, false);
    SumAndCheck(*communicator, {FirstDevices(n)}, 0, true);
    BroadcastAndCheck(*communicator, 0, 0);
  }
}

// Two shards as threads over Gloo on loopback, two logical devices each: shard s has gpu:s and gpu:s+2, so
// that no two shards' NCCL cliques share a GPU on a machine with 1, 2 or 4 GPUs.
TEST(CudaCommunicator, StagingAcrossTwoShardsOverGlooSumsEveryDevice) {
  if (GpuCount() == 0) GTEST_SKIP() << "no GPU";
  const int shards = 2;
  const std::vector<std::vector<int>> devices_of_shard{{0, 2}, {1, 3}};
  GlooOptions options = Loopback();
  options.timeout = options.first_iter_timeout = std::chrono::seconds(60);  // NCCL's cliques form meanwhile
  OnConnectedShards(shards, options, [&](int shard, GlooCommunicator& gloo) {
    const std::shared_ptr<Communicator> across(&gloo, [](Communicator*) {});  // OnConnectedShards owns it
    auto communicator = MakeCudaCommunicator(MakeCudaCommunicator(devices_of_shard[shard]), across);
    EXPECT_EQ(communicator->rank(), shard);
    EXPECT_EQ(communicator->size(), shards);
    SumAndCheck(*communicator, devices_of_shard, shard, false);
    BroadcastAndCheck(*communicator, shard, 1);
    SumAndCheck(*communicator, devices_of_shard, shard, false, DataType::kBFloat16);
    SumAndCheck(*communicator, devices_of_shard, shard, false, DataType::kFloat16);
  });
}

OperatorDef CudaCollective(const std::string& type, const std::vector<std::string>& blobs,
                           const std::vector<std::string>& outputs, int devices) {
  std::vector<std::string> inputs{"gpus"};
  inputs.insert(inputs.end(), blobs.begin(), blobs.end());
  OperatorDef op = MakeOperatorDef(type, inputs, outputs, {Arg("num_devices", int64_t{devices})});
  SetDevice(&op, {DeviceType::kCuda, 0});
  return op;
}

void FeedOn(Workspace* ws, const std::string& name, int device, const Tensor& value) {
  Tensor* blob = ws->CreateBlob(name);
  blob->PlaceOn({DeviceType::kCuda, device});
  blob->CopyFrom(value);
}

TEST(CudaCollectiveOps, AllreduceSumsBucketsInDeviceMemoryAndBroadcastCopiesDeviceZero) {
  if (GpuCount() == 0) GTEST_SKIP() << "no GPU";
  Workspace ws;
  ws.SetObject<Communicator>("gpus", MakeCudaCommunicator(FirstDevices(2)));
  // Two devices, two blobs each: a (2) and b (3).
  for (int d = 0; d < 2; ++d) {
    FeedOn(&ws, fmt::format("a{}", d), d, TensorFromValues({2}, {1.0f * d, 10.0f}));
    FeedOn(&ws, fmt::format("b{}", d), d, TensorFromValues({3}, {1, 2, 3.0f + d}));
  }
  std::vector<std::string> blobs = {"a0", "b0", "a1", "b1"};
  NetDef def;
  def.set_name("allreduce");
  *def.add_op() = CudaCollective("Allreduce", blobs, blobs, 2);
  Net* net = ws.CreateNet(def);
  net->Run();
  for (int d = 0; d < 2; ++d) {
    EXPECT_EQ(Values(ws.Blob(fmt::format("a{}", d))), (std::vector<float>{1, 20}));
    EXPECT_EQ(Values(ws.Blob(fmt::format("b{}", d))), (std::vector<float>{2, 4, 7}));
  }
  // Next step: the blobs live in the buckets; a1 moves to a fresh buffer, as an op that reallocates its
  // output would do. Both paths give the sums.
  ws.CreateBlob("a1")->ShareStorage(GetDeviceBackend(DeviceType::kCuda).Allocate(1, 64), 0, 64);
  for (int d = 0; d < 2; ++d) {
    ws.CreateBlob(fmt::format("a{}", d))->CopyFrom(TensorFromValues({2}, {1, 2}));
    ws.CreateBlob(fmt::format("b{}", d))->CopyFrom(TensorFromValues({3}, {0, 0, 1}));
  }
  const void* b1_buffer = ws.Blob("b1").raw_data();
  net->Run();
  EXPECT_EQ(ws.Blob("b1").raw_data(), b1_buffer) << "reduced where it was written";
  for (int d = 0; d < 2; ++d) {
    EXPECT_EQ(ws.Blob(fmt::format("a{}", d)).device().id, d);
    EXPECT_EQ(Values(ws.Blob(fmt::format("a{}", d))), (std::vector<float>{2, 4}));
    EXPECT_EQ(Values(ws.Blob(fmt::format("b{}", d))), (std::vector<float>{0, 0, 2}));
  }

  RunOp(&ws, CudaCollective("Allreduce", {"a0", "a1"}, {"s0", "s1"}, 2));
  EXPECT_EQ(Values(ws.Blob("s1")), (std::vector<float>{4, 8}));
  EXPECT_EQ(ws.Blob("s1").device().id, 1) << "each sum in its device's memory";

  FeedOn(&ws, "n0", 0, Int32Tensor({2}, {7, 8}));
  FeedOn(&ws, "n1", 1, Int32Tensor({2}, {0, 0}));
  RunOp(&ws, CudaCollective("Broadcast", {"s0", "n0", "a1", "n1"}, {"s0", "n0", "a1", "n1"}, 2));
  EXPECT_EQ(Values(ws.Blob("a1")), (std::vector<float>{4, 8})) << "a1 took s0's value";
  Tensor n1;
  n1.CopyFrom(ws.Blob("n1"));
  EXPECT_EQ(n1.data<int32_t>()[1], 8) << "any dtype";

  Feed(&ws, "h1", TensorFromValues({2}, {1, 2}));
  EXPECT_THROW(RunOp(&ws, CudaCollective("Allreduce", {"a0", "h1"}, {"a0", "h1"}, 2)), InvalidInput)
      << "a blob in host memory";
  EXPECT_THROW(RunOp(&ws, CudaCollective("Allreduce", {"a0", "a1", "b0"}, {"a0", "a1", "b0"}, 2)),
               InvalidInput)
      << "inputs not a multiple of the devices";
  ws.SetObject<Communicator>("gpus", std::make_shared<LocalCommunicator>());
  EXPECT_THROW(RunOp(&ws, CudaCollective("Allreduce", {"a0", "a1"}, {"a0", "a1"}, 2)), InvalidInput)
      << "a communicator of host memory";
}

TEST(CudaCollectiveOps, CreateCommonWorldMakesTheCommunicatorOfTheDevicesOrStagesTheShards) {
  if (GpuCount() == 0) GTEST_SKIP() << "no GPU";
  Workspace ws;
  for (int d = 0; d < 2; ++d) FeedOn(&ws, fmt::format("a{}", d), d, TensorFromValues({2}, {1.0f + d, 2}));
  auto on_gpu0 = [](OperatorDef op) {
    SetDevice(&op, {DeviceType::kCuda, 0});
    return op;
  };
  NetDef def;
  def.set_name("reduce");
  *def.add_op() = on_gpu0(CreateCommonWorldDef("gpus", {0, 1}));
  *def.add_op() = CudaCollective("Allreduce", {"a0", "a1"}, {"a0", "a1"}, 2);
  ws.RunNetOnce(def);
  EXPECT_EQ(Values(ws.Blob("a1")), (std::vector<float>{3, 4}));

  // A job of one shard: staging through its host communicator adds nothing.
  ws.SetObject<Communicator>("shards", std::make_shared<LocalCommunicator>());
  *def.mutable_op(0) = on_gpu0(CreateCommonWorldDef("gpus", {0, 1}, "shards"));
  ws.RunNetOnce(def);
  EXPECT_EQ(Values(ws.Blob("a1")), (std::vector<float>{6, 8}));

  ws.SetObject<Communicator>("shards", MakeCudaCommunicator(FirstDevices(1)));
  EXPECT_THROW(ws.RunNetOnce(def), InvalidInput) << "a CudaCommunicator over other devices";
}

}  // namespace
}  // namespace lockstep::testing
