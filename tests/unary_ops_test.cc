// Sigmoid, Tanh and Sqr: values against the C library, in place and in a blocked layout where allowed, and
// finite-difference gradients.
#include <cmath>
#include <functional>

#include "test_util.h"

namespace lockstep::testing {
namespace {

struct Unary {
  const char* type;
  std::function<double(double)> reference;
};

const Unary kUnaries[] = {
    {"Sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }},
    {"Tanh", [](double x) { return std::tanh(x); }},
    {"Sqr", [](double x) { return x * x; }},
};

Tensor Reference(const Tensor& x, const std::function<double(double)>& f) {
  Tensor y(x.shape(), DataType::kFloat);
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = static_cast<float>(f(x.data<float>()[i]));
  return y;
}

TEST(UnaryOps, ForwardMatchesTheCLibrary) {
  const Tensor x = RandomTensor({3, 4, 5}, 11, -4.f, 4.f);
  for (const Unary& unary : kUnaries) {
    SCOPED_TRACE(unary.type);
    Workspace ws;
    Feed(&ws, "x", x);
    RunOp(&ws, MakeOperatorDef(unary.type, {"x"}, {"y"}));
    ExpectNear(ws.Blob("y"), Reference(x, unary.reference), 1e-6f);
  }
}

TEST(UnaryOps, SigmoidAndTanhRunInPlaceAndInABlockedLayout) {
  const Tensor x = RandomTensor({2, 3, 4, 4}, 12, -3.f, 3.f);
  for (const Unary& unary : {kUnaries[0], kUnaries[1]}) {
    SCOPED_TRACE(unary.type);
    Workspace ws;
    Feed(&ws, "x", Blocked(x));
    RunOp(&ws, MakeOperatorDef(unary.type, {"x"}, {"x"}));
    EXPECT_FALSE(ws.Blob("x").is_plain()) << "the op keeps the layout it was given";
    ExpectNear(Plain(ws.Blob("x")), Reference(x, unary.reference), 1e-6f);
  }
}

TEST(UnaryOps, SqrRefusesToRunInPlaceSinceItsGradientReadsX) {
  Workspace ws;
  Feed(&ws, "x", RandomTensor({3}, 1));
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("Sqr", {"x"}, {"x"})), InvalidInput);
}

TEST(UnaryOps, Gradients) {
  for (const Unary& unary : kUnaries) {
    SCOPED_TRACE(unary.type);
    CheckGradient(MakeOperatorDef(unary.type, {"x"}, {"y"}), {{"x", RandomTensor({2, 3, 4}, 13, -2.f, 2.f)}});
  }
}

TEST(UnaryOps, SigmoidSaturatesWithoutNaN) {
  Workspace ws;
  Feed(&ws, "x", TensorFromValues({3}, {-200.f, 0.f, 200.f}));
  RunOp(&ws, MakeOperatorDef("Sigmoid", {"x"}, {"y"}));
  EXPECT_EQ(Values(ws.Blob("y")), (std::vector<float>{0.f, 0.5f, 1.f}));
}

}  // namespace
}  // namespace lockstep::testing
