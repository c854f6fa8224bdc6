// Core pieces: tensors, workspace, schemas, registry errors, protobuf compatibility, executors.
#include <google/protobuf/text_format.h>

#include <atomic>

#include "lockstep/core/device_backend.h"
#include "test_util.h"

namespace lockstep::testing {

TEST(Tensor, ResizeKeepsBufferWhenItFits) {
  Tensor t({4, 8}, DataType::kFloat);
  const void* before = t.raw_data();
  t.Resize({2, 8});
  EXPECT_EQ(t.raw_data(), before);
  EXPECT_EQ(t.numel(), 16);
  t.Resize({64, 8});
  EXPECT_EQ(t.numel(), 512);
  EXPECT_THROW(t.data<int32_t>(), Error);
}

TEST(Tensor, ScalarHasOneElement) {
  Tensor t(Shape{}, DataType::kInt64);
  EXPECT_EQ(t.numel(), 1);
  EXPECT_EQ(ShapeToString(t.shape()), "()");
}

// A shape whose element count wraps around 64 bits would get a small buffer under a huge shape.
TEST(Tensor, ShapesBeyondAnyMemoryAreRefused) {
  const int64_t wraps = (int64_t{1} << 62) + 1;  // times 4 is 2^64 + 4: 4 in 64 bits
  try {
    NumElements({wraps, 4});
    FAIL() << "a wrapping shape was accepted";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()),
              "shape (4611686018427387905, 4) has more than 2^60 elements, more than any memory holds");
  }
  EXPECT_THROW(NumElements({int64_t{1} << 32, int64_t{1} << 32}), InvalidInput);  // wraps to 0
  EXPECT_THROW(Tensor({int64_t{1} << 40, int64_t{1} << 30}, DataType::kFloat), InvalidInput);
  EXPECT_EQ(NumElements({wraps, 4, 0}), 0);  // empty whatever the other dimensions
  EXPECT_EQ(NumElements({int64_t{1} << 30, int64_t{1} << 30}), int64_t{1} << 60);
}

TEST(Schema, ArityAndInplaceAreChecked) {
  Workspace ws;
  Feed(&ws, "x", TensorFromValues({1}, {1.0f}));
  try {
    CreateOperator(MakeOperatorDef("Relu", {"x", "x"}, {"y"}), &ws);
    FAIL() << "two inputs accepted";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("takes 1 inputs, got 2"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(CreateOperator(MakeOperatorDef("Relu", {"x"}, {"x"}), &ws));
  EXPECT_THROW(CreateOperator(MakeOperatorDef("Accuracy", {"x", "y"}, {"x"}), &ws), InvalidInput);
}

TEST(Registry, UnknownTypeNamesTheClosestKnownOnes) {
  Workspace ws;
  auto refusal = [&](const std::string& type, const Device& device = {}) {
    OperatorDef def = MakeOperatorDef(type, {"x"}, {"y"});
    def.mutable_device_option()->set_device_type(static_cast<int>(device.type));
    try {
      CreateOperator(def, &ws);
    } catch (const InvalidInput& e) {
      return std::string(e.what());
    }
    return std::string("created");
  };
  EXPECT_EQ(refusal("Frobnicate"), "unknown operator type 'Frobnicate'; `lockstep ops` lists them");
  EXPECT_EQ(refusal("Rleu"), "unknown operator type 'Rleu'; did you mean Relu?");
  if (!FindDeviceBackend(DeviceType::kCuda))
    EXPECT_EQ(
        refusal("Relu", {DeviceType::kCuda, 0}),
        "Relu(x) -> y is placed on gpu:0, but this lockstep was built without CUDA (LOCKSTEP_CUDA=OFF); "
        "place it on the CPU");
}

TEST(Registry, UnknownEngineFallsBackToTheDefaultImplementation) {
  Workspace ws;
  Feed(&ws, "x", TensorFromValues({2}, {-1.0f, 3.0f}));
  auto def = MakeOperatorDef("Relu", {"x"}, {"y"});
  def.set_engine("CUDNN");
  RunOp(&ws, def);
  EXPECT_EQ(Values(ws.Blob("y")), (std::vector<float>{0.0f, 3.0f}));
}

TEST(NetDefProto, ReadsCaffe2TextFormat) {
  // A net as Caffe2 prints it; the field names and numbers must match caffe2.proto.
  const char* text = R"(
    name: "example"
    op { input: "data" input: "conv1_w" output: "conv1" type: "Conv"
         arg { name: "kernel" i: 3 } arg { name: "pads" ints: 1 ints: 1 ints: 1 ints: 1 }
         device_option { device_type: 1 device_id: 2 } engine: "CUDNN" }
    external_input: "data"
  )";
  NetDef net;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &net));
  EXPECT_EQ(GetIntArgument(net.op(0), "kernel", 0), 3);
  EXPECT_EQ(GetIntsArgument(net.op(0), "pads"), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(DeviceOf(net.op(0)).ToString(), "gpu:2");
  // Binary encoding: OperatorDef.type is field 4 (tag 0x22), NetDef.op field 2 (tag 0x12).
  std::string bytes = MakeOperatorDef("Relu", {}, {}).SerializeAsString();
  EXPECT_EQ(bytes, std::string("\x22\x04Relu"));
  NetDef wrapper;
  *wrapper.add_op() = MakeOperatorDef("Relu", {}, {});
  EXPECT_EQ(wrapper.SerializeAsString()[0], '\x12');
}

TEST(NetDefProto, FileRoundTripTextAndBinary) {
  NetDef net;
  net.set_name("roundtrip");
  *net.add_op() = MakeOperatorDef("Scale", {"x"}, {"y"}, {Arg("scale", 0.5f)});
  for (const char* suffix : {".pbtxt", ".pb"}) {
    std::string path = ::testing::TempDir() + "/net" + suffix;
    WriteNetDef(net, path);
    EXPECT_EQ(ReadNetDef(path).DebugString(), net.DebugString());
  }
  EXPECT_THROW(ReadNetDef("/nonexistent/net.pb"), IoError);
}

TEST(Executor, DagRunsIndependentBranchesAndRespectsOrder) {
  // Two independent chains joined at the end; run many times to shake out races.
  NetDef net;
  net.set_name("dag");
  net.set_type("dag");
  net.set_num_workers(4);
  *net.add_op() = MakeOperatorDef("Scale", {"x"}, {"a1"}, {Arg("scale", 2.0f)});
  *net.add_op() = MakeOperatorDef("Scale", {"x"}, {"b1"}, {Arg("scale", 3.0f)});
  *net.add_op() = MakeOperatorDef("Relu", {"a1"}, {"a1"});
  *net.add_op() = MakeOperatorDef("Relu", {"b1"}, {"b2"});
  *net.add_op() = MakeOperatorDef("Sum", {"a1", "b2"}, {"y"});
  *net.add_op() = MakeOperatorDef("Scale", {"y"}, {"x"}, {Arg("scale", 0.2f)});  // overwrites an input: WAR
  Workspace ws;
  Feed(&ws, "x", TensorFromValues({2}, {1.0f, -1.0f}));
  Net* dag = ws.CreateNet(net);
  auto* dag_net = dynamic_cast<DagNet*>(dag);
  ASSERT_NE(dag_net, nullptr);
  EXPECT_EQ(dag_net->parents()[5], (std::vector<int>{0, 1, 4}));
  for (int i = 0; i < 50; ++i) dag->Run();
  // Each run maps x -> relu(5x) with x >= 0 ... x=1 -> 1 (5*0.2) forever; x=-1 -> 0 then stays 0.
  EXPECT_EQ(Values(ws.Blob("x")), (std::vector<float>{1.0f, 0.0f}));
}

TEST(Executor, ErrorsNameTheOperator) {
  for (const char* type : {"simple", "dag"}) {
    NetDef net;
    net.set_name(std::string("failing_") + type);
    net.set_type(type);
    *net.add_op() = MakeOperatorDef("Relu", {"missing"}, {"y"});
    Workspace ws;
    try {
      ws.RunNetOnce(net);
      FAIL();
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find("input 'missing' has not been set"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace lockstep::testing
