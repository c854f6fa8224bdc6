// SoftmaxWithLoss: softmax and loss against a reference loop, stability for large logits, bad labels,
// gradient.
#include <algorithm>
#include <cmath>

#include "test_util.h"

namespace lockstep::testing {
namespace {}  // namespace

TEST(SoftmaxWithLossOp, ForwardMatchesReference) {
  Workspace ws;
  Tensor logits = RandomTensor({4, 5}, 1, -3.f, 3.f);
  std::vector<int32_t> labels{0, 4, 2, 2};
  Feed(&ws, "logits", logits);
  Feed(&ws, "labels", Int32Tensor({4}, labels));
  RunOp(&ws,
        MakeOperatorDef("SoftmaxWithLoss", {"logits", "labels"}, {"softmax", "loss"}, {Arg("scale", 0.5f)}));
  Tensor expected({4, 5}, DataType::kFloat);
  double loss = 0;
  for (int i = 0; i < 4; ++i) {
    const float* row = logits.data<float>() + i * 5;
    double total = 0;
    for (int j = 0; j < 5; ++j) total += std::exp(row[j]);
    for (int j = 0; j < 5; ++j)
      expected.data<float>()[i * 5 + j] = static_cast<float>(std::exp(row[j]) / total);
    loss -= std::log(std::exp(row[labels[i]]) / total);
  }
  ExpectNear(ws.Blob("softmax"), expected, 1e-5f);
  EXPECT_EQ(ws.Blob("loss").shape(), Shape{});
  EXPECT_NEAR(ws.Blob("loss").data<float>()[0], loss / 4 * 0.5, 1e-5);
}

TEST(SoftmaxWithLossOp, StableForLargeLogitsAndColumnLabels) {
  Workspace ws;
  Feed(&ws, "logits", TensorFromValues({2, 3}, {1000.f, 0.f, -1000.f, 500.f, 500.f, 500.f}));
  Feed(&ws, "labels", Int32Tensor({2, 1}, {2, 1}));
  RunOp(&ws, MakeOperatorDef("SoftmaxWithLoss", {"logits", "labels"}, {"softmax", "loss"}));
  std::vector<float> softmax = Values(ws.Blob("softmax"));
  EXPECT_NEAR(softmax[0], 1.f, 1e-6f);
  EXPECT_NEAR(softmax[4], 1.f / 3, 1e-6f);
  // Row 0 puts probability exp(-2000) on its label: clamped at 1e-20, so -log is 46.05, not inf.
  float loss = ws.Blob("loss").data<float>()[0];
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_NEAR(loss, (-std::log(1e-20) + std::log(3.0)) / 2, 1e-3);
}

TEST(SoftmaxWithLossOp, LabelOutOfRangeIsInvalidInput) {
  Workspace ws;
  Feed(&ws, "logits", RandomTensor({2, 3}, 1));
  Feed(&ws, "labels", Int32Tensor({2}, {1, 3}));
  try {
    RunOp(&ws, MakeOperatorDef("SoftmaxWithLoss", {"logits", "labels"}, {"softmax", "loss"}));
    FAIL() << "expected InvalidInput";
  } catch (const InvalidInput& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("label 3"), std::string::npos) << message;
    EXPECT_NE(message.find("[0, 3)"), std::string::npos) << message;
  }
  Feed(&ws, "labels", Int32Tensor({2}, {-1, 0}));
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("SoftmaxWithLoss", {"logits", "labels"}, {"softmax", "loss"})),
               InvalidInput);
  Feed(&ws, "labels", RandomTensor({2}, 1));  // float labels
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("SoftmaxWithLoss", {"logits", "labels"}, {"softmax", "loss"})),
               InvalidInput);
}

TEST(SoftmaxWithLossOp, Gradient) {
  GradientCheckOptions options;
  options.inputs_to_check = {0};
  options.outputs_with_grad = {1};
  CheckGradient(
      MakeOperatorDef("SoftmaxWithLoss", {"logits", "labels"}, {"softmax", "loss"}, {Arg("scale", 2.f)}),
      {{"logits", RandomTensor({3, 4}, 1, -2.f, 2.f)}, {"labels", Int32Tensor({3}, {3, 0, 1})}}, options);
}

TEST(SoftmaxWithLossOp, GradientValues) {
  Workspace ws;
  Feed(&ws, "logits", TensorFromValues({1, 2}, {0.f, 0.f}));
  Feed(&ws, "labels", Int32Tensor({1}, {1}));
  RunOp(&ws, MakeOperatorDef("SoftmaxWithLoss", {"logits", "labels"}, {"softmax", "loss"}));
  Feed(&ws, "dloss", TensorFromValues({}, {3.f}));
  RunOp(&ws,
        MakeOperatorDef("SoftmaxWithLossGradient", {"logits", "labels", "softmax", "dloss"}, {"dlogits"}));
  EXPECT_EQ(Values(ws.Blob("dlogits")), (std::vector<float>{1.5f, -1.5f}));
}

TEST(SoftmaxWithLossOp, ShapeInference) {
  NetDef net;
  *net.add_op() = MakeOperatorDef("SoftmaxWithLoss", {"logits", "labels"}, {"softmax", "loss"});
  auto shapes = InferNetShapes(net, {{"logits", {{8, 10}}}, {"labels", {{8}, DataType::kInt32}}});
  EXPECT_EQ(shapes["softmax"].dims, (Shape{8, 10}));
  EXPECT_EQ(shapes["loss"].dims, Shape{});
}

}  // namespace lockstep::testing
