// Add (plain and broadcast), Sum (including in place), Scale and SumReduceLike: values and gradients.
#include "test_util.h"

namespace lockstep::testing {

TEST(ElementwiseOps, AddSameShape) {
  Workspace ws;
  Tensor a = RandomTensor({2, 3, 4}, 1), b = RandomTensor({2, 3, 4}, 2);
  Feed(&ws, "a", a);
  Feed(&ws, "b", b);
  RunOp(&ws, MakeOperatorDef("Add", {"a", "b"}, {"c"}));
  Tensor expected(a.shape(), DataType::kFloat);
  for (int64_t i = 0; i < a.numel(); ++i) expected.data<float>()[i] = a.data<float>()[i] + b.data<float>()[i];
  ExpectNear(ws.Blob("c"), expected, 1e-6f);
}

TEST(ElementwiseOps, AddBroadcastSuffix) {
  Workspace ws;
  Tensor a = RandomTensor({2, 3, 4}, 1), b = RandomTensor({3, 4}, 2);
  Feed(&ws, "a", a);
  Feed(&ws, "b", b);
  RunOp(&ws, MakeOperatorDef("Add", {"a", "b"}, {"c"}, {Arg("broadcast", 1)}));
  Tensor expected(a.shape(), DataType::kFloat);
  for (int64_t i = 0; i < a.numel(); ++i)
    expected.data<float>()[i] = a.data<float>()[i] + b.data<float>()[i % 12];
  ExpectNear(ws.Blob("c"), expected, 1e-6f);
}

TEST(ElementwiseOps, AddInPlaceOverEitherInput) {
  for (const char* target : {"a", "b"}) {
    Workspace ws;
    Feed(&ws, "a", TensorFromValues({3}, {1.f, 2.f, 3.f}));
    Feed(&ws, "b", TensorFromValues({3}, {10.f, 20.f, 30.f}));
    RunOp(&ws, MakeOperatorDef("Add", {"a", "b"}, {target}));
    EXPECT_EQ(Values(ws.Blob(target)), (std::vector<float>{11.f, 22.f, 33.f})) << target;
  }
}

TEST(ElementwiseOps, AddRejectsMismatchedShapes) {
  Workspace ws;
  Feed(&ws, "a", RandomTensor({2, 3}, 1));
  Feed(&ws, "b", RandomTensor({3}, 2));
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("Add", {"a", "b"}, {"c"})), InvalidInput);
  Feed(&ws, "b", RandomTensor({2}, 2));
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("Add", {"a", "b"}, {"c"}, {Arg("broadcast", 1)})), InvalidInput);
}

TEST(ElementwiseOps, AddGradient) {
  CheckGradient(MakeOperatorDef("Add", {"a", "b"}, {"c"}),
                {{"a", RandomTensor({2, 3}, 1)}, {"b", RandomTensor({2, 3}, 2)}});
  CheckGradient(MakeOperatorDef("Add", {"a", "b"}, {"c"}, {Arg("broadcast", 1)}),
                {{"a", RandomTensor({2, 3, 4}, 1)}, {"b", RandomTensor({4}, 2)}});
  // A broadcast whose suffix is the whole shape reduces nothing.
  CheckGradient(MakeOperatorDef("Add", {"a", "b"}, {"c"}, {Arg("broadcast", 1)}),
                {{"a", RandomTensor({2, 3}, 1)}, {"b", RandomTensor({2, 3}, 2)}});
}

TEST(ElementwiseOps, AddGradientOfOneInputOnly) {
  GradientCheckOptions options;
  options.inputs_to_check = {1};
  CheckGradient(MakeOperatorDef("Add", {"a", "b"}, {"c"}, {Arg("broadcast", 1)}),
                {{"a", RandomTensor({3, 2}, 1)}, {"b", RandomTensor({2}, 2)}}, options);
}

TEST(ElementwiseOps, SumOfThree) {
  Workspace ws;
  Feed(&ws, "x0", TensorFromValues({2, 2}, {1.f, 2.f, 3.f, 4.f}));
  Feed(&ws, "x1", TensorFromValues({2, 2}, {10.f, 20.f, 30.f, 40.f}));
  Feed(&ws, "x2", TensorFromValues({2, 2}, {100.f, 200.f, 300.f, 400.f}));
  RunOp(&ws, MakeOperatorDef("Sum", {"x0", "x1", "x2"}, {"y"}));
  EXPECT_EQ(Values(ws.Blob("y")), (std::vector<float>{111.f, 222.f, 333.f, 444.f}));
  RunOp(&ws, MakeOperatorDef("Sum", {"x1"}, {"z"}));
  EXPECT_EQ(Values(ws.Blob("z")), Values(ws.Blob("x1")));
}

TEST(ElementwiseOps, SumInPlaceAccumulates) {
  Workspace ws;
  // Large enough that oneDNN splits the work across threads.
  Tensor a = RandomTensor({300, 700}, 1), b = RandomTensor({300, 700}, 2);
  Feed(&ws, "a", a);
  Feed(&ws, "b", b);
  RunOp(&ws, MakeOperatorDef("Sum", {"a", "b"}, {"a"}));
  Tensor expected(a.shape(), DataType::kFloat);
  for (int64_t i = 0; i < a.numel(); ++i) expected.data<float>()[i] = a.data<float>()[i] + b.data<float>()[i];
  ExpectNear(ws.Blob("a"), expected, 1e-6f);
}

TEST(ElementwiseOps, SumRejectsOtherInPlace) {
  Workspace ws;
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("Sum", {"a", "b"}, {"b"})), InvalidInput);
}

TEST(ElementwiseOps, SumRejectsMismatchedShapes) {
  Workspace ws;
  Feed(&ws, "a", RandomTensor({2, 3}, 1));
  Feed(&ws, "b", RandomTensor({3, 2}, 2));
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("Sum", {"a", "b"}, {"c"})), InvalidInput);
}

TEST(ElementwiseOps, SumGradient) {
  CheckGradient(
      MakeOperatorDef("Sum", {"x0", "x1", "x2"}, {"y"}),
      {{"x0", RandomTensor({3, 2}, 1)}, {"x1", RandomTensor({3, 2}, 2)}, {"x2", RandomTensor({3, 2}, 3)}});
}

TEST(ElementwiseOps, ScaleValuesAndInPlace) {
  Workspace ws;
  Feed(&ws, "x", TensorFromValues({4}, {1.f, -2.f, 0.5f, 0.f}));
  RunOp(&ws, MakeOperatorDef("Scale", {"x"}, {"y"}, {Arg("scale", -3.f)}));
  EXPECT_EQ(Values(ws.Blob("y")), (std::vector<float>{-3.f, 6.f, -1.5f, 0.f}));
  RunOp(&ws, MakeOperatorDef("Scale", {"x"}, {"x"}, {Arg("scale", 2.f)}));
  EXPECT_EQ(Values(ws.Blob("x")), (std::vector<float>{2.f, -4.f, 1.f, 0.f}));
  RunOp(&ws, MakeOperatorDef("Scale", {"x"}, {"copy"}));
  EXPECT_EQ(Values(ws.Blob("copy")), Values(ws.Blob("x")));
}

TEST(ElementwiseOps, ScaleGradient) {
  CheckGradient(MakeOperatorDef("Scale", {"x"}, {"y"}, {Arg("scale", 0.25f)}),
                {{"x", RandomTensor({2, 5}, 1)}});
}

TEST(ElementwiseOps, SumReduceLikeSumsLeadingDims) {
  Workspace ws;
  Tensor dy = RandomTensor({4, 2, 3}, 1);
  Feed(&ws, "dy", dy);
  Feed(&ws, "b", RandomTensor({2, 3}, 2));
  RunOp(&ws, MakeOperatorDef("SumReduceLike", {"dy", "b"}, {"db"}));
  Tensor expected({2, 3}, DataType::kFloat);
  expected.Zero();
  for (int64_t i = 0; i < dy.numel(); ++i) expected.data<float>()[i % 6] += dy.data<float>()[i];
  ExpectNear(ws.Blob("db"), expected, 1e-5f);
}

TEST(ElementwiseOps, ShapeInference) {
  NetDef net;
  *net.add_op() = MakeOperatorDef("Add", {"a", "b"}, {"c"}, {Arg("broadcast", 1)});
  *net.add_op() = MakeOperatorDef("Sum", {"c", "a"}, {"d"});
  *net.add_op() = MakeOperatorDef("Scale", {"d"}, {"e"});
  auto shapes = InferNetShapes(net, {{"a", {{2, 3}}}, {"b", {{3}}}});
  EXPECT_EQ(shapes["e"].dims, (Shape{2, 3}));
}

}  // namespace lockstep::testing
