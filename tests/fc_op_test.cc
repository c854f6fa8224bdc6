// FC against a direct loop (2-D input and inputs flattened at `axis`), FCGradient by finite differences,
// Caffe2's gradient-op layout, shape inference and shape errors.
#include "lockstep/core/schema.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

// x is (N, K) in memory, w is (M, K), b is (M); returns y (N, M) reshaped to y_shape.
Tensor ReferenceFc(const Tensor& x, const Tensor& w, const Tensor& b, const Shape& y_shape) {
  int64_t m_size = w.dim(0), k_size = w.dim(1), n_size = x.numel() / k_size;
  Tensor y(y_shape, DataType::kFloat);
  for (int64_t n = 0; n < n_size; ++n)
    for (int64_t m = 0; m < m_size; ++m) {
      double sum = b.data<float>()[m];
      for (int64_t k = 0; k < k_size; ++k)
        sum += x.data<float>()[n * k_size + k] * w.data<float>()[m * k_size + k];
      y.data<float>()[n * m_size + m] = static_cast<float>(sum);
    }
  return y;
}

struct FcCase {
  std::string name;
  Shape x, w, y;
  std::vector<Arg> args;
};

std::vector<FcCase> Cases() {
  return {
      {"2-D", {3, 5}, {4, 5}, {3, 4}, {}},
      {"4-D flattened at axis 1", {2, 3, 2, 2}, {5, 12}, {2, 5}, {}},
      {"3-D flattened at axis 2", {2, 3, 4}, {6, 4}, {2, 3, 6}, {Arg("axis", 2)}},
      {"negative axis", {2, 3, 4}, {6, 4}, {2, 3, 6}, {Arg("axis", -1)}},
  };
}

std::map<std::string, Tensor> FcInputs(const FcCase& c) {
  return {{"x", RandomTensor(c.x, 1)}, {"w", RandomTensor(c.w, 2)}, {"b", RandomTensor({c.w[0]}, 3)}};
}

TEST(FcOp, ForwardMatchesReference) {
  for (const auto& c : Cases()) {
    SCOPED_TRACE(c.name);
    Workspace ws;
    auto inputs = FcInputs(c);
    for (const auto& [name, value] : inputs) Feed(&ws, name, value);
    RunOp(&ws, MakeOperatorDef("FC", {"x", "w", "b"}, {"y"}, c.args));
    ExpectNear(ws.Blob("y"), ReferenceFc(inputs["x"], inputs["w"], inputs["b"], c.y), 1e-5f);
  }
}

TEST(FcOp, Gradient) {
  for (const auto& c : Cases()) {
    SCOPED_TRACE(c.name);
    CheckGradient(MakeOperatorDef("FC", {"x", "w", "b"}, {"y"}, c.args), FcInputs(c));
  }
}

TEST(FcOp, GradientOfSomeInputsOnly) {
  // Frozen W and b (no_dweight, no_bias), b only (dW to scratch), W only.
  FcCase c = Cases()[0];
  for (std::vector<int> inputs : {std::vector<int>{0}, std::vector<int>{2}, std::vector<int>{1}}) {
    SCOPED_TRACE(inputs[0]);
    GradientCheckOptions options;
    options.inputs_to_check = inputs;
    CheckGradient(MakeOperatorDef("FC", {"x", "w", "b"}, {"y"}), FcInputs(c), options);
  }
}

TEST(FcOp, GradientOpLooksLikeCaffe2s) {
  NetDef net;
  *net.add_op() = MakeOperatorDef("FC", {"x", "w", "b"}, {"y"});
  AddGradientOperators(&net, {"y"}, {"x", "w", "b"});
  const OperatorDef& grad = net.op(net.op_size() - 1);
  EXPECT_EQ(grad.type(), "FCGradient");
  EXPECT_EQ(std::vector<std::string>(grad.input().begin(), grad.input().end()),
            (std::vector<std::string>{"x", "w", "y_grad"}));
  EXPECT_EQ(std::vector<std::string>(grad.output().begin(), grad.output().end()),
            (std::vector<std::string>{"w_grad", "b_grad", "x_grad"}));
}

TEST(FcOp, InfersShapes) {
  NetDef net;
  *net.add_op() = MakeOperatorDef("FC", {"x", "w", "b"}, {"y"}, {Arg("axis", 2)});
  *net.add_op() =
      MakeOperatorDef("FCGradient", {"x", "w", "y"}, {"dw", "dx"}, {Arg("axis", 2), Arg("no_bias", 1)});
  auto shapes = InferNetShapes(net, {{"x", {{2, 3, 4}}}, {"w", {{6, 4}}}, {"b", {{6}}}});
  EXPECT_EQ(shapes["y"].dims, (Shape{2, 3, 6}));
  EXPECT_EQ(shapes["dw"].dims, (Shape{6, 4}));
  EXPECT_EQ(shapes["dx"].dims, (Shape{2, 3, 4}));
}

TEST(FcOp, RejectsMismatchedShapes) {
  auto expect_invalid = [](const Shape& x, const Shape& w, const Shape& b, const std::string& fragment) {
    Workspace ws;
    Feed(&ws, "x", RandomTensor(x, 1));
    Feed(&ws, "w", RandomTensor(w, 2));
    Feed(&ws, "b", RandomTensor(b, 3));
    try {
      RunOp(&ws, MakeOperatorDef("FC", {"x", "w", "b"}, {"y"}));
      ADD_FAILURE() << "expected InvalidInput mentioning '" << fragment << "'";
    } catch (const InvalidInput& error) {
      EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
    }
  };
  expect_invalid({3, 5}, {4, 6}, {4}, "W must be (M, 5)");
  expect_invalid({3, 5}, {4, 5}, {3}, "b must be (4)");
  expect_invalid({3}, {4, 3}, {4}, "axis 1 is out of range");
}

}  // namespace
}  // namespace lockstep::testing
