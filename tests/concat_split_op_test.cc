// Concat and Split: values along several axes, split_info, partial outputs, errors and the gradient.
#include "test_util.h"

namespace lockstep::testing {
namespace {

// Reference concat of (outer, extent_i, inner) pieces along the middle dim.
Tensor ReferenceConcat(const std::vector<Tensor>& pieces, int axis) {
  Shape shape = pieces[0].shape();
  shape[axis] = 0;
  for (const Tensor& piece : pieces) shape[axis] += piece.dim(axis);
  Tensor out(shape, DataType::kFloat);
  int64_t outer = out.SizeToDim(axis), inner = out.SizeFromDim(axis + 1);
  int64_t offset = 0;
  for (const Tensor& piece : pieces) {
    int64_t extent = piece.dim(axis);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t e = 0; e < extent; ++e)
        for (int64_t i = 0; i < inner; ++i)
          out.data<float>()[(o * shape[axis] + offset + e) * inner + i] =
              piece.data<float>()[(o * extent + e) * inner + i];
    offset += extent;
  }
  return out;
}

std::vector<int32_t> IntValues(const Tensor& tensor) {
  const int32_t* data = tensor.data<int32_t>();
  return std::vector<int32_t>(data, data + tensor.numel());
}

}  // namespace

TEST(ConcatSplitOp, ConcatAlongEachAxis) {
  for (int axis : {0, 1, 2, -1}) {
    int canonical = axis < 0 ? axis + 3 : axis;
    std::vector<Tensor> pieces;
    for (int64_t extent : {1, 3, 2}) {
      Shape shape{2, 3, 4};
      shape[canonical] = extent;
      pieces.push_back(RandomTensor(shape, static_cast<unsigned>(extent)));
    }
    Workspace ws;
    for (int i = 0; i < 3; ++i) Feed(&ws, "x" + std::to_string(i), pieces[i]);
    RunOp(&ws, MakeOperatorDef("Concat", {"x0", "x1", "x2"}, {"y", "split_info"}, {Arg("axis", axis)}));
    ExpectNear(ws.Blob("y"), ReferenceConcat(pieces, canonical), 0.f);
    EXPECT_EQ(ws.Blob("split_info").dtype(), DataType::kInt32);
    EXPECT_EQ(IntValues(ws.Blob("split_info")), (std::vector<int32_t>{1, 3, 2})) << "axis " << axis;
  }
}

TEST(ConcatSplitOp, SplitUndoesConcat) {
  Workspace ws;
  Feed(&ws, "a", RandomTensor({2, 1, 3}, 1));
  Feed(&ws, "b", RandomTensor({2, 4, 3}, 2));
  RunOp(&ws, MakeOperatorDef("Concat", {"a", "b"}, {"y", "split_info"}));
  RunOp(&ws, MakeOperatorDef("Split", {"y", "split_info"}, {"a2", "b2"}));
  ExpectNear(ws.Blob("a2"), ws.Blob("a"), 0.f);
  ExpectNear(ws.Blob("b2"), ws.Blob("b"), 0.f);
}

TEST(ConcatSplitOp, SplitByArgEqualAndParts) {
  Workspace ws;
  Feed(&ws, "x", TensorFromValues({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7}));
  RunOp(&ws, MakeOperatorDef("Split", {"x"}, {"p", "q"}));
  EXPECT_EQ(Values(ws.Blob("p")), (std::vector<float>{0, 1, 4, 5}));
  EXPECT_EQ(Values(ws.Blob("q")), (std::vector<float>{2, 3, 6, 7}));
  RunOp(&ws,
        MakeOperatorDef("Split", {"x"}, {"r", "s"}, {Arg("axis", 0), Arg("split", std::vector<int>{1, 1})}));
  EXPECT_EQ(Values(ws.Blob("s")), (std::vector<float>{4, 5, 6, 7}));
  RunOp(&ws, MakeOperatorDef("Split", {"x"}, {"t"},
                             {Arg("split", std::vector<int>{1, 2, 1}), Arg("parts", std::vector<int>{1})}));
  EXPECT_EQ(ws.Blob("t").shape(), (Shape{2, 2}));
  EXPECT_EQ(Values(ws.Blob("t")), (std::vector<float>{1, 2, 5, 6}));
}

TEST(ConcatSplitOp, Errors) {
  Workspace ws;
  Feed(&ws, "a", RandomTensor({2, 3}, 1));
  Feed(&ws, "b", RandomTensor({3, 3}, 2));
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("Concat", {"a", "b"}, {"y", "info"})), InvalidInput);
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("Concat", {"a", "b"}, {"y", "info"}, {Arg("axis", 2)})),
               InvalidInput);
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("Split", {"a"}, {"p", "q"})), InvalidInput);  // 3 is odd
  EXPECT_THROW(
      RunOp(&ws, MakeOperatorDef("Split", {"a"}, {"p", "q"}, {Arg("split", std::vector<int>{1, 1})})),
      InvalidInput);
}

TEST(ConcatSplitOp, Gradient) {
  GradientCheckOptions options;
  options.inputs_to_check = {0, 1, 2};
  CheckGradient(MakeOperatorDef("Concat", {"x0", "x1", "x2"}, {"y", "split_info"}, {Arg("axis", 1)}),
                {{"x0", RandomTensor({2, 1, 2}, 1)},
                 {"x1", RandomTensor({2, 2, 2}, 2)},
                 {"x2", RandomTensor({2, 3, 2}, 3)}},
                options);
}

TEST(ConcatSplitOp, GradientOfSomeInputs) {
  GradientCheckOptions options;
  options.inputs_to_check = {2};
  CheckGradient(
      MakeOperatorDef("Concat", {"x0", "x1", "x2"}, {"y", "split_info"}, {Arg("axis", 0)}),
      {{"x0", RandomTensor({1, 3}, 1)}, {"x1", RandomTensor({2, 3}, 2)}, {"x2", RandomTensor({2, 3}, 3)}},
      options);
}

TEST(ConcatSplitOp, ShapeInference) {
  NetDef net;
  *net.add_op() = MakeOperatorDef("Concat", {"a", "b"}, {"y", "info"});
  *net.add_op() = MakeOperatorDef("Split", {"y"}, {"p", "q"}, {Arg("split", std::vector<int>{4, 1})});
  auto shapes = InferNetShapes(net, {{"a", {{2, 3, 5}}}, {"b", {{2, 2, 5}}}});
  EXPECT_EQ(shapes["y"].dims, (Shape{2, 5, 5}));
  EXPECT_EQ(shapes["info"].dims, (Shape{2}));
  EXPECT_EQ(shapes["info"].dtype, DataType::kInt32);
  EXPECT_EQ(shapes["q"].dims, (Shape{2, 1, 5}));
}

}  // namespace lockstep::testing
