// Copy forward for float and integer tensors, and its gradient.
#include "test_util.h"

namespace lockstep::testing {

TEST(CopyOp, CopiesFloat) {
  Workspace ws;
  Tensor x = RandomTensor({2, 3, 4}, 11);
  Feed(&ws, "x", x);
  RunOp(&ws, MakeOperatorDef("Copy", {"x"}, {"y"}));
  EXPECT_EQ(ws.Blob("y").shape(), x.shape());
  EXPECT_EQ(Values(ws.Blob("y")), Values(x));
  EXPECT_NE(ws.Blob("y").raw_data(), ws.Blob("x").raw_data());
}

TEST(CopyOp, CopiesInt64) {
  Workspace ws;
  Tensor x({3}, DataType::kInt64);
  for (int i = 0; i < 3; ++i) x.data<int64_t>()[i] = (int64_t{1} << 50) + i;
  Feed(&ws, "x", x);
  RunOp(&ws, MakeOperatorDef("Copy", {"x"}, {"y"}));
  const Tensor& y = ws.Blob("y");
  ASSERT_EQ(y.dtype(), DataType::kInt64);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(y.data<int64_t>()[i], (int64_t{1} << 50) + i);
}

TEST(CopyOp, Gradient) {
  CheckGradient(MakeOperatorDef("Copy", {"x"}, {"y"}), {{"x", RandomTensor({3, 5}, 4)}});
}

}  // namespace lockstep::testing
