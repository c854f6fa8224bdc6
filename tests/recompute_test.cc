// Recomputing relu(BN(X)) in the backward pass: SpatialBNReluAgain gives the training output and mask bit for
// bit (the premise), and the rewrite sends every gradient reader of either, and only those, to one
// recomputation placed just before the first of them.
#include "lockstep/parallel/recompute.h"

#include <cstring>

#include "lockstep/core/cpu_isa.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

OperatorDef FusedTrainingBN(const std::string& x, const std::string& y) {
  return MakeOperatorDef("SpatialBN", {x, "scale", "bias", "rm", "rv"},
                         {y, "rm", "rv", y + "_saved_mean", y + "_saved_var", y + "_mask"},
                         {Arg("epsilon", 1e-5f), Arg("relu", 1)});
}

bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

}  // namespace

TEST(Recompute, SpatialBNReluAgainGivesTheTrainingOutputAndMaskBitForBit) {
  std::vector<DataType> dtypes{DataType::kFloat};
  if (CpuHasBFloat16Instructions()) dtypes.push_back(DataType::kBFloat16);
  for (DataType dtype : dtypes)
    for (bool blocked : {false, true})
      for (Shape shape : {Shape{4, 16, 7, 7}, Shape{3, 5, 6, 2}, Shape{8, 64, 14, 14}, Shape{6, 8}}) {
        if (blocked && shape.size() != 4) continue;
        SCOPED_TRACE(fmt::format("{} {} {}", DataTypeName(dtype), blocked ? "blocked" : "plain",
                                 ShapeToString(shape)));
        Workspace ws;
        const int64_t c = shape[1];
        Tensor x = RandomTensor(shape, 1, -2.f, 3.f);
        Feed(&ws, "x32", blocked ? Blocked(x) : x);
        RunOp(&ws, MakeOperatorDef("Cast", {"x32"}, {"x"}, {Arg("to", int(dtype))}));
        Feed(&ws, "scale", RandomTensor({c}, 2, 0.5f, 1.5f));
        Feed(&ws, "bias", RandomTensor({c}, 3));
        Feed(&ws, "rm", RandomTensor({c}, 4));
        Feed(&ws, "rv", RandomTensor({c}, 5, 0.5f, 2.f));
        RunOp(&ws, FusedTrainingBN("x", "y"));
        RunOp(&ws,
              MakeOperatorDef("SpatialBNReluAgain", {"x", "scale", "bias", "y_saved_mean", "y_saved_var"},
                              {"again", "again_mask"}, {Arg("epsilon", 1e-5f)}));
        EXPECT_TRUE(SameBytes(ws.Blob("again"), ws.Blob("y")));
        EXPECT_EQ(ws.Blob("again").is_plain(), ws.Blob("y").is_plain());
        EXPECT_TRUE(SameBytes(ws.Blob("again_mask"), ws.Blob("y_mask")));
      }
}

// The shape function sizes the mask as the op writes it, so the memory plan can place it.
TEST(Recompute, SpatialBNReluAgainShapes) {
  const OperatorDef def = MakeOperatorDef("SpatialBNReluAgain", {"x", "scale", "bias", "mean", "var"},
                                          {"y", "mask"}, {Arg("epsilon", 1e-5f)});
  const Shape x{2, 4, 3, 3};
  const std::vector<TensorShape> inputs{{x, DataType::kFloat},
                                        {{4}, DataType::kFloat},
                                        {{4}, DataType::kFloat},
                                        {{4}, DataType::kFloat},
                                        {{4}, DataType::kFloat}};
  const std::vector<TensorShape> out = SchemaRegistry::Of(def).InferShapes(def, inputs);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].dims, x);
  Workspace ws;
  Feed(&ws, "x", RandomTensor(x, 1));
  for (const char* name : {"scale", "bias", "mean"}) Feed(&ws, name, RandomTensor({4}, 2));
  Feed(&ws, "var", RandomTensor({4}, 3, 0.5f, 1.f));
  RunOp(&ws, def);
  EXPECT_EQ(out[1].dtype, DataType::kUInt8);
  EXPECT_EQ(out[1].dims, ws.Blob("mask").shape());
  const std::vector<TensorShape> wrong{inputs[0], {{5}, DataType::kFloat}, inputs[2], inputs[3], inputs[4]};
  EXPECT_THROW(SchemaRegistry::Of(def).InferShapes(def, wrong), InvalidInput);
}

TEST(Recompute, GradientReadersReadOneRecomputationPlacedBeforeTheFirst) {
  NetDef net;
  *net.add_op() = MakeOperatorDef("Conv", {"data", "w1"}, {"c1"}, {Arg("kernel", 3)});
  *net.add_op() = FusedTrainingBN("c1", "r1");
  *net.add_op() = MakeOperatorDef("Conv", {"r1", "w2"}, {"c2"}, {Arg("kernel", 3)});
  *net.add_op() = MakeOperatorDef("Relu", {"r1"}, {"forward_reader"});
  OperatorDef combined = FusedTrainingBN("c2", "r2");
  combined.add_input("sum");  // combined statistics across replicas: normalized with what the replicas sum
  combined.add_input("sum_sq");
  *net.add_op() = combined;
  *net.add_op() = FusedTrainingBN("c2", "c2");  // in place: X is gone, nothing to recompute from
  OperatorDef conv_gradient = MakeOperatorDef("ConvGradient", {"r1", "w2", "dc2"}, {"dw2", "dr1"});
  conv_gradient.set_is_gradient_op(true);
  *net.add_op() = conv_gradient;
  OperatorDef bn_gradient =
      MakeOperatorDef("SpatialBNGradient", {"c1", "scale", "dr1", "r1_saved_mean", "r1_saved_var", "r1_mask"},
                      {"dc1"}, {Arg("relu", 1), Arg("gradients", std::vector<int64_t>{0})});
  bn_gradient.set_is_gradient_op(true);
  *net.add_op() = bn_gradient;
  net.mutable_op(1)->mutable_device_option()->set_device_id(1);
  OperatorDef on_gpu = FusedTrainingBN("c3", "r3");
  SetDevice(&on_gpu, {DeviceType::kCuda, 0});
  *net.add_op() = on_gpu;
  OperatorDef gpu_reader = MakeOperatorDef("Copy", {"r3"}, {"r3_copy"});
  gpu_reader.set_is_gradient_op(true);
  *net.add_op() = gpu_reader;

  ASSERT_EQ(RecomputeNormalizedActivations(&net), std::set<std::string>{"r1_mask"});
  ASSERT_EQ(net.op_size(), 11);
  EXPECT_EQ(net.op(2).input(0), "r1");  // forward readers keep the forward output
  EXPECT_EQ(net.op(3).input(0), "r1");
  const OperatorDef& again = net.op(6);
  EXPECT_EQ(again.type(), "SpatialBNReluAgain");
  EXPECT_TRUE(again.is_gradient_op());
  EXPECT_EQ(std::vector<std::string>(again.input().begin(), again.input().end()),
            (std::vector<std::string>{"c1", "scale", "bias", "r1_saved_mean", "r1_saved_var"}));
  EXPECT_EQ(std::vector<std::string>(again.output().begin(), again.output().end()),
            (std::vector<std::string>{"r1_recomputed", "r1_mask_recomputed"}));
  EXPECT_FLOAT_EQ(FloatArg(again, "epsilon"), 1e-5f);
  EXPECT_EQ(again.device_option().device_id(), 1);
  EXPECT_EQ(net.op(7).type(), "ConvGradient");
  EXPECT_EQ(net.op(7).input(0), "r1_recomputed");
  EXPECT_EQ(net.op(8).type(), "SpatialBNGradient");
  EXPECT_EQ(net.op(8).input(0), "c1");
  EXPECT_EQ(net.op(8).input(5), "r1_mask_recomputed");
  EXPECT_EQ(net.op(10).input(0), "r3");  // a GPU's keeps its output

  NetDef without_gradients;
  *without_gradients.add_op() = FusedTrainingBN("c1", "r1");
  *without_gradients.add_op() = MakeOperatorDef("Conv", {"r1", "w2"}, {"c2"}, {Arg("kernel", 3)});
  EXPECT_TRUE(RecomputeNormalizedActivations(&without_gradients).empty());
  EXPECT_EQ(without_gradients.op_size(), 2);
}

}  // namespace lockstep::testing
