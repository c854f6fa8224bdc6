// Recomputing relu(BN(X)) in the backward pass: test-mode SpatialBN with the batch's saved statistics gives
// the training output bit for bit (the premise), and the rewrite sends every gradient reader, and only
// those, to one recomputation placed just before the first of them.
#include <cstring>

#include "lockstep/core/cpu_isa.h"
#include "lockstep/parallel/recompute.h"
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

TEST(Recompute, TestModeWithSavedStatisticsGivesTheTrainingOutputBitForBit) {
  std::vector<DataType> dtypes{DataType::kFloat};
  if (CpuHasBFloat16Instructions()) dtypes.push_back(DataType::kBFloat16);
  for (DataType dtype : dtypes)
    for (bool blocked : {false, true})
      for (Shape shape : {Shape{4, 16, 7, 7}, Shape{3, 5, 6, 2}, Shape{8, 64, 14, 14}}) {
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
        RunOp(&ws, MakeOperatorDef("SpatialBN", {"x", "scale", "bias", "y_saved_mean", "y_saved_var"},
                                   {"again"}, {Arg("epsilon", 1e-5f), Arg("relu", 1), Arg("is_test", 1)}));
        EXPECT_TRUE(SameBytes(ws.Blob("again"), ws.Blob("y")));
        EXPECT_EQ(ws.Blob("again").is_plain(), ws.Blob("y").is_plain());
      }
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
  OperatorDef other_reader = MakeOperatorDef("Copy", {"r1"}, {"r1_copy"});
  other_reader.set_is_gradient_op(true);
  *net.add_op() = other_reader;
  net.mutable_op(1)->mutable_device_option()->set_device_id(1);

  ASSERT_EQ(RecomputeNormalizedActivations(&net), 1);
  ASSERT_EQ(net.op_size(), 9);
  EXPECT_EQ(net.op(2).input(0), "r1");  // forward readers keep the forward output
  EXPECT_EQ(net.op(3).input(0), "r1");
  const OperatorDef& again = net.op(6);
  EXPECT_EQ(again.type(), "SpatialBN");
  EXPECT_TRUE(again.is_gradient_op());
  EXPECT_EQ(std::vector<std::string>(again.input().begin(), again.input().end()),
            (std::vector<std::string>{"c1", "scale", "bias", "r1_saved_mean", "r1_saved_var"}));
  EXPECT_EQ(std::vector<std::string>(again.output().begin(), again.output().end()),
            std::vector<std::string>{"r1_recomputed"});
  EXPECT_EQ(IntArg(again, "is_test"), 1);
  EXPECT_EQ(IntArg(again, "relu"), 1);
  EXPECT_EQ(again.device_option().device_id(), 1);
  EXPECT_EQ(net.op(7).type(), "ConvGradient");
  EXPECT_EQ(net.op(7).input(0), "r1_recomputed");
  EXPECT_EQ(net.op(8).input(0), "r1_recomputed");

  NetDef without_gradients;
  *without_gradients.add_op() = FusedTrainingBN("c1", "r1");
  *without_gradients.add_op() = MakeOperatorDef("Conv", {"r1", "w2"}, {"c2"}, {Arg("kernel", 3)});
  EXPECT_EQ(RecomputeNormalizedActivations(&without_gradients), 0);
  EXPECT_EQ(without_gradients.op_size(), 2);
}

}  // namespace lockstep::testing
