// WeightedSum against a reference loop, in place and out of place.
#include "lockstep/core/schema.h"
#include "test_util.h"

namespace lockstep::testing {

TEST(WeightedSumOp, MatchesReference) {
  Workspace ws;
  const Shape shape{3, 4, 5};
  std::vector<Tensor> xs{RandomTensor(shape, 1), RandomTensor(shape, 2), RandomTensor(shape, 3)};
  std::vector<float> ws_values{0.5f, -2.0f, 1.25f};
  std::vector<std::string> inputs;
  for (int i = 0; i < 3; ++i) {
    Feed(&ws, "x" + std::to_string(i), xs[i]);
    Feed(&ws, "w" + std::to_string(i), TensorFromValues({}, {ws_values[i]}));
    inputs.push_back("x" + std::to_string(i));
    inputs.push_back("w" + std::to_string(i));
  }
  RunOp(&ws, MakeOperatorDef("WeightedSum", inputs, {"y"}));
  Tensor expected(shape, DataType::kFloat);
  for (int64_t j = 0; j < expected.numel(); ++j) {
    float total = 0;
    for (int i = 0; i < 3; ++i) total += ws_values[i] * xs[i].data<float>()[j];
    expected.data<float>()[j] = total;
  }
  ExpectNear(ws.Blob("y"), expected, 1e-6f);
}

TEST(WeightedSumOp, InPlaceOnFirstInput) {
  Workspace ws;
  Feed(&ws, "x", TensorFromValues({3}, {1.0f, 2.0f, 3.0f}));
  Feed(&ws, "a", TensorFromValues({1}, {2.0f}));
  Feed(&ws, "g", TensorFromValues({3}, {10.0f, 20.0f, 30.0f}));
  Feed(&ws, "b", TensorFromValues({1}, {-0.1f}));
  RunOp(&ws, MakeOperatorDef("WeightedSum", {"x", "a", "g", "b"}, {"x"}));
  ExpectNear(ws.Blob("x"), TensorFromValues({3}, {1.0f, 2.0f, 3.0f}), 1e-6f);
}

TEST(WeightedSumOp, RejectsBadInputs) {
  Workspace ws;
  Feed(&ws, "x", RandomTensor({2, 2}, 1));
  Feed(&ws, "y", RandomTensor({4}, 2));
  Feed(&ws, "w", TensorFromValues({}, {1.0f}));
  Feed(&ws, "v", RandomTensor({2}, 3));
  EXPECT_THROW(CreateOperator(MakeOperatorDef("WeightedSum", {"x", "w", "x"}, {"z"}), &ws), InvalidInput);
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("WeightedSum", {"x", "w", "y", "w"}, {"z"})), InvalidInput);
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("WeightedSum", {"x", "v"}, {"z"})), InvalidInput);
  // Only the first input may be overwritten.
  EXPECT_THROW(CreateOperator(MakeOperatorDef("WeightedSum", {"x", "w", "y", "w"}, {"y"}), &ws),
               InvalidInput);
}

TEST(WeightedSumOp, ShapeInference) {
  NetDef net;
  *net.add_op() = MakeOperatorDef("WeightedSum", {"x", "a", "g", "b"}, {"x"});
  auto shapes = InferNetShapes(net, {{"x", {{2, 3}}}, {"a", {{}}}, {"g", {{2, 3}}}, {"b", {{}}}});
  EXPECT_EQ(shapes["x"].dims, (Shape{2, 3}));
}

}  // namespace lockstep::testing
