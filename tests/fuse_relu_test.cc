// Folding ReLUs into the ops beside them: the fused ops give the bits of the pairs they replace (in float32
// and bfloat16, plain, NHWC and blocked, in place or not), Conv and Add with relu=1 have correct gradients,
// and the rewrite fuses only pairs whose intermediate blob no one else reads.
#include "lockstep/parallel/fuse_relu.h"

#include <cstring>

#include "lockstep/core/cpu_isa.h"
#include "lockstep/core/gradient.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

std::vector<DataType> ComputeTypes() {
  std::vector<DataType> dtypes{DataType::kFloat};
  if (CpuHasBFloat16Instructions()) dtypes.push_back(DataType::kBFloat16);
  return dtypes;
}

using LayOut = Tensor (*)(const Tensor&);  // Plain, Blocked or ChannelsLast

LayOut Layout(bool blocked) { return blocked ? Blocked : Plain; }

// Feeds `name` as a random tensor in `dtype` and the layout `lay_out` gives.
void FeedRandom(Workspace* ws, const std::string& name, const Shape& shape, unsigned seed, DataType dtype,
                LayOut lay_out) {
  const Tensor x = RandomTensor(shape, seed, -2.f, 2.f);
  Feed(ws, name + "_f32", lay_out(x));
  RunOp(ws, MakeOperatorDef("Cast", {name + "_f32"}, {name}, {Arg("to", int(dtype))}));
}

void ExpectSameBits(const Tensor& actual, const Tensor& expected) {
  ASSERT_EQ(actual.dtype(), expected.dtype());
  ASSERT_EQ(actual.shape(), expected.shape());
  ASSERT_EQ(actual.is_plain(), expected.is_plain());
  ASSERT_EQ(actual.nbytes(), expected.nbytes());
  EXPECT_EQ(std::memcmp(actual.raw_data(), expected.raw_data(), actual.nbytes()), 0);
}

OperatorDef GradientOp(const std::string& type, const std::vector<std::string>& inputs,
                       const std::vector<std::string>& outputs) {
  OperatorDef op = MakeOperatorDef(type, inputs, outputs);
  op.set_is_gradient_op(true);
  return op;
}

OperatorDef WithArgs(OperatorDef op, const std::vector<Arg>& args) {
  for (const Arg& arg : args) SetArgument(&op, arg);
  return op;
}

std::vector<std::string> Inputs(const OperatorDef& op) { return {op.input().begin(), op.input().end()}; }

}  // namespace

TEST(FuseRelu, AddWithReluIsAddThenRelu) {
  for (DataType dtype : ComputeTypes())
    for (bool blocked : {false, true})
      for (Shape shape : {Shape{4, 16, 7, 7}, Shape{2, 32, 5, 3}, Shape{3, 5, 6, 2}}) {
        if (blocked && shape[1] % 16 != 0) continue;
        SCOPED_TRACE(fmt::format("{} {} {}", DataTypeName(dtype), blocked ? "blocked" : "plain",
                                 ShapeToString(shape)));
        Workspace ws;
        FeedRandom(&ws, "a", shape, 1, dtype, Layout(blocked));
        FeedRandom(&ws, "b", shape, 2, dtype, Layout(!blocked && shape[1] % 16 == 0));  // B in another layout
        RunOp(&ws, MakeOperatorDef("Add", {"a", "b"}, {"sum"}));
        RunOp(&ws, MakeOperatorDef("Relu", {"sum"}, {"expected"}));
        RunOp(&ws, MakeOperatorDef("Add", {"a", "b"}, {"fused"}, {Arg("relu", 1)}));
        ExpectSameBits(ws.Blob("fused"), ws.Blob("expected"));
        RunOp(&ws, MakeOperatorDef("Add", {"a", "b"}, {"a"}, {Arg("relu", 1)}));  // in place
        ExpectSameBits(ws.Blob("a"), ws.Blob("expected"));
      }
}

TEST(FuseRelu, ConvWithReluIsConvThenRelu) {
  for (DataType dtype : ComputeTypes())
    for (int64_t channels : {6, 16, 32}) {  // NHWC where they do not fill oneDNN's blocks
      SCOPED_TRACE(fmt::format("{} {} channels", DataTypeName(dtype), channels));
      Workspace ws;
      FeedRandom(&ws, "x", {2, channels, 9, 9}, 1, dtype, Plain);
      Feed(&ws, "w", RandomTensor({channels, channels, 3, 3}, 2, -0.3f, 0.3f));
      Feed(&ws, "b", RandomTensor({channels}, 3));
      RunOp(&ws, MakeOperatorDef("Conv", {"x", "w", "b"}, {"c"}, {Arg("kernel", 3), Arg("pad", 1)}));
      RunOp(&ws, MakeOperatorDef("Relu", {"c"}, {"expected"}));
      RunOp(&ws, MakeOperatorDef("Conv", {"x", "w", "b"}, {"fused"},
                                 {Arg("kernel", 3), Arg("pad", 1), Arg("relu", 1)}));
      ExpectSameBits(ws.Blob("fused"), ws.Blob("expected"));
    }
}

// The gradient of Conv with relu=1 is ReLU's, from Y, then the convolution's: checked by finite differences
// where every output is positive (clear of ReLU's kink), and by the ops it makes.
TEST(FuseRelu, ConvWithReluGradient) {
  const OperatorDef conv =
      MakeOperatorDef("Conv", {"x", "w", "b"}, {"y"}, {Arg("kernel", 2), Arg("relu", 1)});
  CheckGradient(conv, {{"x", RandomTensor({2, 3, 4, 4}, 1, 0.5f, 1.f)},
                       {"w", RandomTensor({4, 3, 2, 2}, 2, 0.1f, 0.5f)},
                       {"b", RandomTensor({4}, 3, 0.f, 0.5f)}});
  GradientContext g{conv, {"dy"}, {"dx", "dw", "db"}};
  const std::vector<OperatorDef> ops = (*GradientRegistry::Find("Conv"))(g);
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].type(), "ReluGradient");
  EXPECT_EQ(Inputs(ops[0]), (std::vector<std::string>{"y", "dy"}));
  EXPECT_EQ(ops[1].type(), "ConvGradient");
  EXPECT_EQ(Inputs(ops[1]), (std::vector<std::string>{"x", "w", ops[0].output(0)}));
  EXPECT_EQ(IntArg(ops[1], "relu"), 0);
}

TEST(FuseRelu, SumReluGradientIsSumThenReluGradient) {
  for (DataType dtype : ComputeTypes())
    for (bool blocked : {false, true})
      for (int parts : {1, 2, 3}) {
        const Shape shape{4, 32, 6, 5};
        SCOPED_TRACE(
            fmt::format("{} {} {} parts", DataTypeName(dtype), blocked ? "blocked" : "plain", parts));
        Workspace ws;
        FeedRandom(&ws, "y", shape, 1, dtype, Layout(blocked));
        RunOp(&ws, MakeOperatorDef("Relu", {"y"}, {"y"}));  // zeros where Relu wrote them
        std::vector<std::string> dys;
        for (int k = 0; k < parts; ++k) {
          dys.push_back(fmt::format("dy{}", k));
          FeedRandom(&ws, dys.back(), shape, 2 + k, dtype,
                     Layout(k == 1 ? !blocked : blocked));  // mixed layouts
        }
        RunOp(&ws, MakeOperatorDef("Sum", dys, {"g"}));
        RunOp(&ws, MakeOperatorDef("ReluGradient", {"y", "g"}, {"expected"}));
        std::vector<std::string> inputs{"y"};
        inputs.insert(inputs.end(), dys.begin(), dys.end());
        RunOp(&ws, MakeOperatorDef("SumReluGradient", inputs, {"fused"}));
        ExpectSameBits(ws.Blob("fused"), ws.Blob("expected"));
        RunOp(&ws, MakeOperatorDef("SumReluGradient", inputs, {"dy0"}));  // in place over the first dY
        ExpectSameBits(ws.Blob("dy0"), ws.Blob("expected"));
      }
}

TEST(FuseRelu, SumReluGradientRefusesAnotherShape) {
  Workspace ws;
  Feed(&ws, "y", RandomTensor({2, 3}, 1));
  Feed(&ws, "dy0", RandomTensor({2, 3}, 2));
  Feed(&ws, "dy1", RandomTensor({3, 2}, 3));
  try {
    RunOp(&ws, MakeOperatorDef("SumReluGradient", {"y", "dy0", "dy1"}, {"dx"}));
    FAIL() << "accepted dY of another shape";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("input 'dy1' is (3, 2) but Y 'y' is (2, 3)"), std::string::npos)
        << e.what();
  }
}

// Values whose sums stay clear of ReLU's kink, where finite differences would straddle it.
TEST(FuseRelu, AddWithReluGradient) {
  const Tensor a = TensorFromValues({2, 3}, {0.7f, -0.9f, 0.4f, -0.5f, 1.2f, -1.1f});
  CheckGradient(MakeOperatorDef("Add", {"a", "b"}, {"c"}, {Arg("relu", 1)}),
                {{"a", a}, {"b", TensorFromValues({2, 3}, {0.2f, 0.3f, -0.8f, 0.1f, 0.3f, -0.2f})}});
  CheckGradient(MakeOperatorDef("Add", {"a", "b"}, {"c"}, {Arg("relu", 1), Arg("broadcast", 1)}),
                {{"a", a}, {"b", TensorFromValues({3}, {0.2f, 0.3f, -0.8f})}});
}

// X is a Relu's output (many exact zeros); dY comes plain, as from an FC's gradient, or in X's layout.
TEST(FuseRelu, AveragePoolReluGradientIsPoolGradientThenReluGradient) {
  const std::vector<std::pair<std::string, std::vector<Arg>>> windows{
      {"2x2", {Arg("kernel", 2), Arg("stride", 2)}},
      {"3x3", {Arg("kernel", 3), Arg("stride", 3)}},  // 1/9 is inexact: the division must be oneDNN's
      {"global", {Arg("global_pooling", 1)}},
  };
  const std::vector<std::pair<std::string, LayOut>> layouts{
      {"plain", Plain}, {"nhwc", ChannelsLast}, {"nChw16c", Blocked}};
  for (DataType dtype : ComputeTypes())
    for (const auto& [layout, lay_out] : layouts)
      for (const auto& [window, args] : windows)
        for (bool dy_in_x_layout : {false, true}) {
          SCOPED_TRACE(fmt::format("{} {} {} window, dY {}", DataTypeName(dtype), layout, window,
                                   dy_in_x_layout ? "in X's layout" : "plain"));
          Workspace ws;
          // 9 x 7: rows and columns past the last window.
          FeedRandom(&ws, "pre", {2, 16, 9, 7}, 1, dtype, lay_out);
          RunOp(&ws, MakeOperatorDef("Relu", {"pre"}, {"x"}));
          RunOp(&ws, MakeOperatorDef("AveragePool", {"x"}, {"y"}, args));
          FeedRandom(&ws, "dy", Plain(ws.Blob("y")).shape(), 2, dtype, dy_in_x_layout ? lay_out : Plain);
          RunOp(&ws, WithArgs(GradientOp("AveragePoolGradient", {"x", "y", "dy"}, {"g"}), args));
          RunOp(&ws, GradientOp("ReluGradient", {"x", "g"}, {"expected"}));
          RunOp(&ws, WithArgs(GradientOp("AveragePoolReluGradient", {"x", "dy"}, {"fused"}), args));
          ExpectSameBits(ws.Blob("fused"), ws.Blob("expected"));
        }
}

TEST(FuseRelu, AveragePoolReluGradientNeedsWindowsThatTile) {
  Workspace ws;
  try {
    CreateOperator(
        MakeOperatorDef("AveragePoolReluGradient", {"x", "dy"}, {"dx"}, {Arg("kernel", 3), Arg("stride", 2)}),
        &ws);
    FAIL() << "overlapping windows were accepted";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("its windows must tile the plane"), std::string::npos) << e.what();
  }
}

TEST(FuseRelu, FusesPairsWhoseIntermediateOnlyTheReluReads) {
  NetDef net;
  // A residual block's end, fused.
  *net.add_op() = MakeOperatorDef("Add", {"branch", "shortcut"}, {"s1"});
  *net.add_op() = MakeOperatorDef("Relu", {"s1"}, {"y1"});
  // A convolution and its ReLU in place, fused.
  *net.add_op() = MakeOperatorDef("Conv", {"y1", "w"}, {"c"}, {Arg("kernel", 1)});
  *net.add_op() = MakeOperatorDef("Relu", {"c"}, {"c"});
  // The Add's output is read by another op too: kept.
  *net.add_op() = MakeOperatorDef("Add", {"y1", "shortcut"}, {"s2"});
  *net.add_op() = MakeOperatorDef("Relu", {"s2"}, {"y2"});
  *net.add_op() = MakeOperatorDef("Copy", {"s2"}, {"s2_copy"});
  // An op between reads the ReLU's output before the ReLU writes it: kept.
  *net.add_op() = MakeOperatorDef("Add", {"y2", "shortcut"}, {"s3"});
  *net.add_op() = MakeOperatorDef("Copy", {"y3"}, {"old_y3"});
  *net.add_op() = MakeOperatorDef("Relu", {"s3"}, {"y3"});
  // On a GPU: kept.
  OperatorDef gpu_add = MakeOperatorDef("Add", {"y3", "shortcut"}, {"s4"});
  OperatorDef gpu_relu = MakeOperatorDef("Relu", {"s4"}, {"y4"});
  SetDevice(&gpu_add, {DeviceType::kCuda, 0});
  SetDevice(&gpu_relu, {DeviceType::kCuda, 0});
  *net.add_op() = gpu_add;
  *net.add_op() = gpu_relu;
  // The backward pass: a Sum read by a ReluGradient alone, another op between them, fused.
  *net.add_op() = GradientOp("Sum", {"d_branch", "d_shortcut"}, {"d_y1"});
  *net.add_op() = GradientOp("ConvGradient", {"x", "w", "d_other"}, {"dw", "dx"});
  *net.add_op() = GradientOp("ReluGradient", {"y1", "d_y1"}, {"d_s1"});
  // The Sum's output is kept for the caller: not fused.
  *net.add_op() = GradientOp("Sum", {"d_a", "d_b"}, {"kept"});
  *net.add_op() = GradientOp("ReluGradient", {"y2", "kept"}, {"d_s2"});
  // An op between overwrites a part of the Sum: not fused.
  *net.add_op() = GradientOp("Sum", {"d_c", "d_d"}, {"d_y3"});
  *net.add_op() = GradientOp("Scale", {"d_other"}, {"d_c"});
  *net.add_op() = GradientOp("ReluGradient", {"y3", "d_y3"}, {"d_s3"});
  // A pool's gradient read by the ReluGradient of the pool's input, over windows that tile: fused.
  auto pool_gradient = [](const std::string& x, const std::string& dx, int kernel, int stride) {
    return WithArgs(GradientOp("AveragePoolGradient", {x, "p_" + x, "d_p_" + x}, {dx}),
                    {Arg("kernel", kernel), Arg("stride", stride)});
  };
  *net.add_op() = pool_gradient("y4", "d_y4", 2, 2);
  *net.add_op() = GradientOp("ReluGradient", {"y4", "d_y4"}, {"d_s4"});
  // Windows that overlap: not fused.
  *net.add_op() = pool_gradient("y5", "d_y5", 3, 2);
  *net.add_op() = GradientOp("ReluGradient", {"y5", "d_y5"}, {"d_s5"});

  EXPECT_EQ(FuseRelus(&net, {"kept"}), 4);
  std::vector<std::string> types;  // "+relu" marks a producer with the ReLU folded in
  for (const auto& op : net.op()) {
    const bool producer = op.type() == "Add" || op.type() == "Conv";
    types.push_back(op.type() + (producer && IntArg(op, "relu") != 0 ? "+relu" : ""));
  }
  EXPECT_EQ(types, (std::vector<std::string>{"Add+relu",
                                             "Conv+relu",
                                             "Add",
                                             "Relu",
                                             "Copy",
                                             "Add",
                                             "Copy",
                                             "Relu",
                                             "Add",
                                             "Relu",
                                             "ConvGradient",
                                             "SumReluGradient",
                                             "Sum",
                                             "ReluGradient",
                                             "Sum",
                                             "Scale",
                                             "ReluGradient",
                                             "AveragePoolReluGradient",
                                             "AveragePoolGradient",
                                             "ReluGradient"}));
  EXPECT_EQ(net.op(0).output(0), "y1");
  EXPECT_EQ(net.op(1).output(0), "c");
  const OperatorDef& fused = net.op(11);
  EXPECT_TRUE(fused.is_gradient_op());
  EXPECT_EQ(Inputs(fused), (std::vector<std::string>{"y1", "d_branch", "d_shortcut"}));
  EXPECT_EQ(fused.output(0), "d_s1");
  const OperatorDef& pool = net.op(17);
  EXPECT_TRUE(pool.is_gradient_op());
  EXPECT_EQ(Inputs(pool), (std::vector<std::string>{"y4", "d_p_y4"}));
  EXPECT_EQ(pool.output(0), "d_s4");
  EXPECT_EQ(IntArg(pool, "kernel"), 2);
}

}  // namespace lockstep::testing
