// Softmax: rows at any axis against a reference loop in double, stability for large inputs, bad axes, and
// the finite-difference gradient.
#include <cmath>

#include "test_util.h"

namespace lockstep::testing {
namespace {

// X as (rows, columns) at `axis`, each row's softmax computed in double.
Tensor ReferenceSoftmax(const Tensor& x, int axis) {
  int64_t rows = 1;
  for (int i = 0; i < axis; ++i) rows *= x.dim(i);
  const int64_t columns = x.numel() / rows;
  Tensor y(x.shape(), DataType::kFloat);
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x.data<float>() + r * columns;
    double total = 0;
    for (int64_t c = 0; c < columns; ++c) total += std::exp(static_cast<double>(in[c]));
    for (int64_t c = 0; c < columns; ++c)
      y.data<float>()[r * columns + c] = static_cast<float>(std::exp(static_cast<double>(in[c])) / total);
  }
  return y;
}

TEST(SoftmaxOp, RowsAtEveryAxisMatchAReference) {
  const Tensor x = RandomTensor({2, 3, 4}, 21, -3.f, 3.f);
  for (int axis : {0, 1, 2}) {
    SCOPED_TRACE(axis);
    Workspace ws;
    Feed(&ws, "x", x);
    RunOp(&ws, MakeOperatorDef("Softmax", {"x"}, {"y"}, {Arg("axis", axis)}));
    EXPECT_EQ(ws.Blob("y").shape(), x.shape());
    ExpectNear(ws.Blob("y"), ReferenceSoftmax(x, axis), 1e-6f);
  }
}

TEST(SoftmaxOp, DefaultAxisIsOneAndLargeInputsStayFinite) {
  Workspace ws;
  Feed(&ws, "x", TensorFromValues({2, 2}, {1000.f, 0.f, -1000.f, -1000.f}));
  RunOp(&ws, MakeOperatorDef("Softmax", {"x"}, {"y"}));
  EXPECT_EQ(Values(ws.Blob("y")), (std::vector<float>{1.f, 0.f, 0.5f, 0.5f}));
}

TEST(SoftmaxOp, AxisOutsideXIsAOneLineError) {
  Workspace ws;
  Feed(&ws, "x", RandomTensor({2, 3}, 1));
  try {
    RunOp(&ws, MakeOperatorDef("Softmax", {"x"}, {"y"}, {Arg("axis", 2)}));
    FAIL() << "axis 2 of a 2-D X was accepted";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("axis 2 is out of range for X (2, 3)"), std::string::npos)
        << e.what();
  }
}

TEST(SoftmaxOp, Gradient) {
  CheckGradient(MakeOperatorDef("Softmax", {"x"}, {"y"}), {{"x", RandomTensor({3, 5}, 22, -2.f, 2.f)}});
  CheckGradient(MakeOperatorDef("Softmax", {"x"}, {"y"}, {Arg("axis", 2)}),
                {{"x", RandomTensor({2, 2, 3}, 23, -2.f, 2.f)}});
}

}  // namespace
}  // namespace lockstep::testing
