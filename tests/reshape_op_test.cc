// Flatten, FlattenToVec, Reshape and ResizeLike: shapes, copied values, Caffe2's 0/-1 rules, errors and
// gradients.
#include "test_util.h"

namespace lockstep::testing {
namespace {

std::vector<int64_t> Int64Values(const Tensor& tensor) {
  const int64_t* data = tensor.data<int64_t>();
  return std::vector<int64_t>(data, data + tensor.numel());
}

}  // namespace

TEST(ReshapeOp, FlattenKeepsLeadingDims) {
  Workspace ws;
  Tensor x = RandomTensor({2, 3, 4, 5}, 1);
  Feed(&ws, "x", x);
  RunOp(&ws, MakeOperatorDef("Flatten", {"x"}, {"y"}));
  EXPECT_EQ(ws.Blob("y").shape(), (Shape{2, 60}));
  EXPECT_EQ(Values(ws.Blob("y")), Values(x));
  RunOp(&ws, MakeOperatorDef("Flatten", {"x"}, {"z"}, {Arg("axis", 3)}));
  EXPECT_EQ(ws.Blob("z").shape(), (Shape{24, 5}));
  RunOp(&ws, MakeOperatorDef("Flatten", {"x"}, {"w"}, {Arg("axis", 0)}));
  EXPECT_EQ(ws.Blob("w").shape(), (Shape{1, 120}));
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("Flatten", {"x"}, {"v"}, {Arg("axis", 5)})), InvalidInput);
}

TEST(ReshapeOp, FlattenCopiesUnlessInPlace) {
  Workspace ws;
  Feed(&ws, "x", TensorFromValues({2, 2}, {1, 2, 3, 4}));
  RunOp(&ws, MakeOperatorDef("Flatten", {"x"}, {"y"}, {Arg("axis", 0)}));
  ws.GetBlob("x")->data<float>()[0] = 9;
  EXPECT_EQ(Values(ws.Blob("y")), (std::vector<float>{1, 2, 3, 4}));
  RunOp(&ws, MakeOperatorDef("Flatten", {"x"}, {"x"}, {Arg("axis", 0)}));
  EXPECT_EQ(ws.Blob("x").shape(), (Shape{1, 4}));
  EXPECT_EQ(Values(ws.Blob("x")), (std::vector<float>{9, 2, 3, 4}));
}

TEST(ReshapeOp, ReshapeRulesAndOldShape) {
  Workspace ws;
  Tensor x = RandomTensor({2, 3, 4}, 1);
  Feed(&ws, "x", x);
  RunOp(&ws, MakeOperatorDef("Reshape", {"x"}, {"y", "old"}, {Arg("shape", std::vector<int>{0, -1, 2})}));
  EXPECT_EQ(ws.Blob("y").shape(), (Shape{2, 6, 2}));
  EXPECT_EQ(Values(ws.Blob("y")), Values(x));
  EXPECT_EQ(ws.Blob("old").dtype(), DataType::kInt64);
  EXPECT_EQ(Int64Values(ws.Blob("old")), (std::vector<int64_t>{2, 3, 4}));
  // The new shape as an input: the gradient's form.
  RunOp(&ws, MakeOperatorDef("Reshape", {"y", "old"}, {"back", "old2"}));
  EXPECT_EQ(ws.Blob("back").shape(), x.shape());
  Tensor shape32({2}, DataType::kInt32);
  shape32.data<int32_t>()[0] = 4;
  shape32.data<int32_t>()[1] = -1;
  Feed(&ws, "shape32", shape32);
  RunOp(&ws, MakeOperatorDef("Reshape", {"x", "shape32"}, {"z"}));
  EXPECT_EQ(ws.Blob("z").shape(), (Shape{4, 6}));
}

TEST(ReshapeOp, ReshapeErrors) {
  Workspace ws;
  Feed(&ws, "x", RandomTensor({2, 3}, 1));
  auto reshape = [&](std::vector<int> shape) {
    RunOp(&ws, MakeOperatorDef("Reshape", {"x"}, {"y", "old"}, {Arg("shape", shape)}));
  };
  EXPECT_THROW(reshape({4, -1}), InvalidInput);    // 6 is not a multiple of 4
  EXPECT_THROW(reshape({-1, -1}), InvalidInput);   // two unknowns
  EXPECT_THROW(reshape({5}), InvalidInput);        // wrong total
  EXPECT_THROW(reshape({0, 0, 0}), InvalidInput);  // X has no dim 2
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("Reshape", {"x"}, {"y"})), InvalidInput);  // no shape at all
}

TEST(ReshapeOp, ResizeLike) {
  Workspace ws;
  Feed(&ws, "a", TensorFromValues({6}, {1, 2, 3, 4, 5, 6}));
  Feed(&ws, "b", RandomTensor({3, 2}, 1));
  RunOp(&ws, MakeOperatorDef("ResizeLike", {"a", "b"}, {"c"}));
  EXPECT_EQ(ws.Blob("c").shape(), (Shape{3, 2}));
  EXPECT_EQ(Values(ws.Blob("c")), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  Feed(&ws, "b", RandomTensor({4}, 1));
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("ResizeLike", {"a", "b"}, {"c"})), InvalidInput);
}

TEST(ReshapeOp, FlattenToVecMakesOneVector) {
  Workspace ws;
  Feed(&ws, "x", TensorFromValues({2, 1, 3}, {1, 2, 3, 4, 5, 6}));
  RunOp(&ws, MakeOperatorDef("FlattenToVec", {"x"}, {"y"}));
  EXPECT_EQ(ws.Blob("y").shape(), (Shape{6}));
  EXPECT_EQ(Values(ws.Blob("y")), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  RunOp(&ws, MakeOperatorDef("FlattenToVec", {"x"}, {"x"}));
  EXPECT_EQ(ws.Blob("x").shape(), (Shape{6}));
  NetDef net;
  *net.add_op() = MakeOperatorDef("FlattenToVec", {"a"}, {"b"});
  EXPECT_EQ(InferNetShapes(net, {{"a", {{4, 5, 2}}}})["b"].dims, (Shape{40}));
}

TEST(ReshapeOp, Gradients) {
  CheckGradient(MakeOperatorDef("Flatten", {"x"}, {"y"}), {{"x", RandomTensor({2, 3, 2}, 1)}});
  CheckGradient(MakeOperatorDef("FlattenToVec", {"x"}, {"y"}), {{"x", RandomTensor({2, 3, 2}, 4)}});
  CheckGradient(MakeOperatorDef("Reshape", {"x"}, {"y", "old"}, {Arg("shape", std::vector<int>{3, -1})}),
                {{"x", RandomTensor({2, 3, 2}, 2)}});
  CheckGradient(MakeOperatorDef("Reshape", {"x"}, {"y"}, {Arg("shape", std::vector<int>{-1})}),
                {{"x", RandomTensor({2, 3}, 3)}});
}

TEST(ReshapeOp, ShapeInference) {
  NetDef net;
  *net.add_op() = MakeOperatorDef("Flatten", {"x"}, {"flat"}, {Arg("axis", 2)});
  *net.add_op() = MakeOperatorDef("Reshape", {"flat"}, {"y", "old"}, {Arg("shape", std::vector<int>{-1, 5})});
  auto shapes = InferNetShapes(net, {{"x", {{2, 3, 5}}}});
  EXPECT_EQ(shapes["flat"].dims, (Shape{6, 5}));
  EXPECT_EQ(shapes["y"].dims, (Shape{6, 5}));
  EXPECT_EQ(shapes["old"].dims, (Shape{2}));
  EXPECT_EQ(shapes["old"].dtype, DataType::kInt64);
}

}  // namespace lockstep::testing
