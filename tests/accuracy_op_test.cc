// Accuracy: top-1 and top-3 against a reference count, Caffe2's tie rule, bad labels.
#include <algorithm>

#include "test_util.h"

namespace lockstep::testing {
namespace {

float RunAccuracy(Workspace* ws, int top_k) {
  RunOp(ws, MakeOperatorDef("Accuracy", {"predictions", "labels"}, {"accuracy"}, {Arg("top_k", top_k)}));
  EXPECT_EQ(ws->Blob("accuracy").shape(), Shape{});
  return ws->Blob("accuracy").data<float>()[0];
}

}  // namespace

TEST(AccuracyOp, TopOneAndTopThreeMatchReference) {
  Workspace ws;
  const int n = 50, d = 7;
  Tensor predictions = RandomTensor({n, d}, 1);
  std::vector<int32_t> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = (i * 3) % d;
  Feed(&ws, "predictions", predictions);
  Feed(&ws, "labels", Int32Tensor({n}, labels));
  for (int k : {1, 3}) {
    int correct = 0;
    for (int i = 0; i < n; ++i) {
      std::vector<float> row(predictions.data<float>() + i * d, predictions.data<float>() + (i + 1) * d);
      std::vector<float> sorted = row;
      std::sort(sorted.rbegin(), sorted.rend());
      correct += row[labels[i]] >= sorted[k - 1];  // random floats have no ties
    }
    EXPECT_FLOAT_EQ(RunAccuracy(&ws, k), static_cast<float>(correct) / n) << "top_k " << k;
  }
}

TEST(AccuracyOp, HandComputedWithTies) {
  Workspace ws;
  Feed(&ws, "predictions",
       TensorFromValues({4, 4}, {0.1f, 0.7f, 0.1f, 0.1f,      // label 1 is the max
                                 0.4f, 0.3f, 0.2f, 0.1f,      // label 2 is third
                                 0.25f, 0.25f, 0.25f, 0.25f,  // all tied: counts at k=1
                                 0.5f, 0.5f, 0.f, 0.f}));     // tie for first
  Feed(&ws, "labels", Int32Tensor({4, 1}, {1, 2, 3, 1}));
  EXPECT_FLOAT_EQ(RunAccuracy(&ws, 1), 0.75f);
  EXPECT_FLOAT_EQ(RunAccuracy(&ws, 3), 1.f);
}

TEST(AccuracyOp, BadLabelsAreInvalidInput) {
  Workspace ws;
  Feed(&ws, "predictions", RandomTensor({2, 3}, 1));
  Feed(&ws, "labels", Int32Tensor({2}, {0, 5}));
  EXPECT_THROW(RunAccuracy(&ws, 1), InvalidInput);
  Feed(&ws, "labels", Int32Tensor({3}, {0, 1, 2}));
  EXPECT_THROW(RunAccuracy(&ws, 1), InvalidInput);
}

TEST(AccuracyOp, HasNoGradient) {
  EXPECT_TRUE(GradientRegistry::IsNonDifferentiable("Accuracy"));
  NetDef net;
  *net.add_op() = MakeOperatorDef("Accuracy", {"predictions", "labels"}, {"accuracy"});
  auto shapes = InferNetShapes(net, {{"predictions", {{8, 10}}}, {"labels", {{8}, DataType::kInt32}}});
  EXPECT_EQ(shapes["accuracy"].dims, Shape{});
}

}  // namespace lockstep::testing
