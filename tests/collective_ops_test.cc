// Allreduce and Broadcast over the devices of one process (LocalCommunicator): sums and copies, in place or
// not, with buckets of several blobs, and after an op has reallocated a blob that lived in the bucket.
#include "lockstep/comm/local_communicator.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

OperatorDef Collective(const std::string& type, const std::vector<std::string>& blobs,
                       const std::vector<std::string>& outputs, int devices) {
  std::vector<std::string> inputs{"local"};
  inputs.insert(inputs.end(), blobs.begin(), blobs.end());
  return MakeOperatorDef(type, inputs, outputs, {Arg("num_devices", int64_t{devices})});
}

}  // namespace

TEST(CollectiveOps, AllreduceSumsEachBlobOverDevicesInPlace) {
  Workspace ws;
  ws.SetObject<Communicator>("local", std::make_shared<LocalCommunicator>());
  // Three devices, two blobs each: a (2) and b (3).
  for (int d = 0; d < 3; ++d) {
    Feed(&ws, fmt::format("a{}", d), TensorFromValues({2}, {1.0f * d, 10.0f}));
    Feed(&ws, fmt::format("b{}", d), TensorFromValues({3}, {1, 2, 3.0f + d}));
  }
  std::vector<std::string> blobs = {"a0", "b0", "a1", "b1", "a2", "b2"};
  Net* net = ws.CreateNet([&] {
    NetDef def;
    def.set_name("allreduce");
    *def.add_op() = Collective("Allreduce", blobs, blobs, 3);
    return def;
  }());
  net->Run();
  for (int d = 0; d < 3; ++d) {
    EXPECT_EQ(Values(ws.Blob(fmt::format("a{}", d))), (std::vector<float>{3, 30}));
    EXPECT_EQ(Values(ws.Blob(fmt::format("b{}", d))), (std::vector<float>{3, 6, 12}));
  }
  // Next step: the blobs now live in the op's buckets; one is replaced by a fresh buffer, as an op that
  // reallocates its output would do. Both paths give the sums.
  ws.CreateBlob("a1")->ShareStorage(
      std::shared_ptr<uint8_t>(new uint8_t[64], std::default_delete<uint8_t[]>()), 0, 64);
  // Written in place, as a gradient op writes its output.
  auto write = [&](const std::string& name, const std::vector<float>& values) {
    Tensor* blob = ws.CreateBlob(name);
    blob->Resize({static_cast<int64_t>(values.size())});
    std::copy(values.begin(), values.end(), blob->data<float>());
  };
  for (int d = 0; d < 3; ++d) {
    write(fmt::format("a{}", d), {1, 2});
    write(fmt::format("b{}", d), {0, 0, 1});
  }
  const void* b2_buffer = ws.Blob("b2").raw_data();
  net->Run();
  EXPECT_EQ(ws.Blob("b2").raw_data(), b2_buffer) << "reduced where the gradient op wrote it";
  for (int d = 0; d < 3; ++d) {
    EXPECT_EQ(Values(ws.Blob(fmt::format("a{}", d))), (std::vector<float>{3, 6}));
    EXPECT_EQ(Values(ws.Blob(fmt::format("b{}", d))), (std::vector<float>{0, 0, 3}));
  }
}

TEST(CollectiveOps, AllreduceIntoOtherBlobsAndBroadcastFromDeviceZero) {
  Workspace ws;
  ws.SetObject<Communicator>("local", std::make_shared<LocalCommunicator>());
  Feed(&ws, "x0", TensorFromValues({2}, {1, 2}));
  Feed(&ws, "x1", TensorFromValues({2}, {3, 4}));
  RunOp(&ws, Collective("Allreduce", {"x0", "x1"}, {"s0", "s1"}, 2));
  EXPECT_EQ(Values(ws.Blob("x0")), (std::vector<float>{1, 2})) << "inputs kept";
  EXPECT_EQ(Values(ws.Blob("s0")), (std::vector<float>{4, 6}));
  EXPECT_EQ(Values(ws.Blob("s1")), (std::vector<float>{4, 6}));

  Feed(&ws, "n1", Int32Tensor({2}, {0, 0}));
  Feed(&ws, "n0", Int32Tensor({2}, {7, 8}));
  RunOp(&ws, Collective("Broadcast", {"x0", "n0", "x1", "n1"}, {"x0", "n0", "x1", "n1"}, 2));
  EXPECT_EQ(Values(ws.Blob("x1")), (std::vector<float>{1, 2}));
  EXPECT_EQ(ws.Blob("n1").data<int32_t>()[1], 8) << "any dtype";

  Feed(&ws, "y1", TensorFromValues({3}, {1, 2, 3}));
  EXPECT_THROW(RunOp(&ws, Collective("Allreduce", {"x0", "y1"}, {"x0", "y1"}, 2)), InvalidInput)
      << "replicas of different shapes";
  EXPECT_THROW(RunOp(&ws, Collective("Allreduce", {"x0", "x1", "y1"}, {"x0", "x1", "y1"}, 2)), InvalidInput)
      << "inputs not a multiple of the devices";
}

}  // namespace lockstep::testing
