// SumElements, AveragedLoss, SquaredL2Distance and LabelCrossEntropy: values against loops in double, the
// clamp of tiny probabilities, bad shapes and labels, and finite-difference gradients.
#include <cmath>

#include "test_util.h"

namespace lockstep::testing {
namespace {

double Sum(const Tensor& x) {
  double total = 0;
  for (float value : Values(x)) total += value;
  return total;
}

TEST(LossOps, SumElementsSumsOrAveragesAndAveragedLossAverages) {
  const Tensor x = RandomTensor({3, 4, 2}, 31);
  Workspace ws;
  Feed(&ws, "x", x);
  RunOp(&ws, MakeOperatorDef("SumElements", {"x"}, {"sum"}));
  RunOp(&ws, MakeOperatorDef("SumElements", {"x"}, {"mean"}, {Arg("average", 1)}));
  RunOp(&ws, MakeOperatorDef("AveragedLoss", {"x"}, {"loss"}));
  EXPECT_EQ(ws.Blob("sum").shape(), Shape{});
  EXPECT_NEAR(ws.Blob("sum").data<float>()[0], Sum(x), 1e-5);
  EXPECT_NEAR(ws.Blob("mean").data<float>()[0], Sum(x) / 24, 1e-6);
  EXPECT_NEAR(ws.Blob("loss").data<float>()[0], Sum(x) / 24, 1e-6);
}

TEST(LossOps, SumElementsGradients) {
  const Tensor x = RandomTensor({3, 4}, 32);
  CheckGradient(MakeOperatorDef("SumElements", {"x"}, {"sum"}), {{"x", x}});
  CheckGradient(MakeOperatorDef("SumElements", {"x"}, {"sum"}, {Arg("average", 1)}), {{"x", x}});
  CheckGradient(MakeOperatorDef("AveragedLoss", {"x"}, {"loss"}), {{"x", x}});
}

TEST(LossOps, AveragedLossOfNothingIsAnError) {
  Workspace ws;
  Feed(&ws, "x", Tensor({0, 3}, DataType::kFloat));
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("AveragedLoss", {"x"}, {"loss"})), InvalidInput);
}

TEST(LossOps, SquaredL2DistanceIsHalfTheSquaredDistanceOfEachRow) {
  const Tensor x = RandomTensor({4, 2, 3}, 33), y = RandomTensor({4, 2, 3}, 34);
  Workspace ws;
  Feed(&ws, "x", x);
  Feed(&ws, "y", y);
  RunOp(&ws, MakeOperatorDef("SquaredL2Distance", {"x", "y"}, {"d"}));
  ASSERT_EQ(ws.Blob("d").shape(), Shape{4});
  for (int i = 0; i < 4; ++i) {
    double total = 0;
    for (int j = 0; j < 6; ++j) total += std::pow(x.data<float>()[i * 6 + j] - y.data<float>()[i * 6 + j], 2);
    EXPECT_NEAR(ws.Blob("d").data<float>()[i], total / 2, 1e-6) << "row " << i;
  }
  Feed(&ws, "y", RandomTensor({4, 6}, 35));
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("SquaredL2Distance", {"x", "y"}, {"d"})), InvalidInput);
}

TEST(LossOps, SquaredL2DistanceGradientReachesBothInputs) {
  CheckGradient(MakeOperatorDef("SquaredL2Distance", {"x", "y"}, {"d"}),
                {{"x", RandomTensor({3, 4}, 36)}, {"y", RandomTensor({3, 4}, 37)}});
}

TEST(LossOps, LabelCrossEntropyIsMinusTheLogOfTheLabelledProbability) {
  Workspace ws;
  Feed(&ws, "p", TensorFromValues({3, 3}, {0.2f, 0.5f, 0.3f, 0.9f, 0.1f, 0.f, 0.25f, 0.25f, 0.5f}));
  Feed(&ws, "label", Int32Tensor({3}, {1, 2, 0}));
  RunOp(&ws, MakeOperatorDef("LabelCrossEntropy", {"p", "label"}, {"y"}));
  const std::vector<float> y = Values(ws.Blob("y"));
  ASSERT_EQ(y.size(), 3u);
  EXPECT_FLOAT_EQ(y[0], -std::log(0.5f));
  EXPECT_FLOAT_EQ(y[1], -std::log(1e-20f));  // a probability of 0 costs 46, not infinity
  EXPECT_FLOAT_EQ(y[2], -std::log(0.25f));
  Feed(&ws, "label", Int32Tensor({3}, {1, 3, 0}));
  try {
    RunOp(&ws, MakeOperatorDef("LabelCrossEntropy", {"p", "label"}, {"y"}));
    FAIL() << "label 3 of 3 classes was accepted";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("label 3 of row 1 is outside [0, 3)"), std::string::npos)
        << e.what();
  }
}

TEST(LossOps, LabelCrossEntropyGradient) {
  GradientCheckOptions options;
  options.inputs_to_check = {0};
  options.step = 1e-3f;
  CheckGradient(MakeOperatorDef("LabelCrossEntropy", {"p", "label"}, {"y"}),
                {{"p", RandomTensor({4, 3}, 38, 0.2f, 1.f)}, {"label", Int32Tensor({4, 1}, {0, 2, 1, 2})}},
                options);
}

// The composition Caffe2's programs build by hand: Softmax, LabelCrossEntropy, AveragedLoss, whose gradient
// is SoftmaxWithLoss's.
TEST(LossOps, SoftmaxCrossEntropyAveragedHasSoftmaxWithLossGradient) {
  const Tensor logits = RandomTensor({4, 5}, 39, -2.f, 2.f);
  const Tensor labels = Int32Tensor({4}, {0, 4, 2, 2});
  NetDef net;
  *net.add_op() = MakeOperatorDef("Softmax", {"logits"}, {"p"});
  *net.add_op() = MakeOperatorDef("LabelCrossEntropy", {"p", "labels"}, {"xent"});
  *net.add_op() = MakeOperatorDef("AveragedLoss", {"xent"}, {"loss"});
  auto gradients = AddGradientOperators(&net, {"loss"}, {"logits"});
  Workspace ws;
  Feed(&ws, "logits", logits);
  Feed(&ws, "labels", labels);
  ws.RunNetOnce(net);
  RunOp(&ws, MakeOperatorDef("SoftmaxWithLoss", {"logits", "labels"}, {"softmax", "swl_loss"}));
  EXPECT_NEAR(ws.Blob("loss").data<float>()[0], ws.Blob("swl_loss").data<float>()[0], 1e-5);
  Feed(&ws, "one", TensorFromValues({}, {1.f}));
  RunOp(&ws,
        MakeOperatorDef("SoftmaxWithLossGradient", {"logits", "labels", "softmax", "one"}, {"expected"}));
  ExpectNear(ws.Blob(gradients.at("logits")), ws.Blob("expected"), 1e-5f);
}

}  // namespace
}  // namespace lockstep::testing
