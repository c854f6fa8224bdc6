// Conv against a direct loop (stride, asymmetric pads, dilation, groups, non-square kernels, the blocked
// layouts oneDNN picks for wider layers), ConvGradient by finite differences, a filter arriving in a blocked
// layout, shape inference and shape errors.
#include "lockstep/core/schema.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

struct ConvGeometry {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_t = 0, pad_l = 0, pad_b = 0, pad_r = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t group = 1;
};

Shape ReferenceOutputShape(const Shape& x, const Shape& w, const ConvGeometry& g) {
  return {x[0], w[0], (x[2] + g.pad_t + g.pad_b - g.dilation_h * (w[2] - 1) - 1) / g.stride_h + 1,
          (x[3] + g.pad_l + g.pad_r - g.dilation_w * (w[3] - 1) - 1) / g.stride_w + 1};
}

// Calls visit(x_index, w_index, y_index) for every product x * w that the convolution of an x of (N, C, H, W)
// with a w of (M, C/group, KH, KW) adds into y (N, M, OH, OW); indices are flat.
template <typename Visit>
void ForEachTap(const Shape& x, const Shape& w, const ConvGeometry& g, Visit visit) {
  Shape y = ReferenceOutputShape(x, w, g);
  int64_t group_c = w[1], group_m = w[0] / g.group;
  for (int64_t n = 0; n < x[0]; ++n)
    for (int64_t m = 0; m < w[0]; ++m)
      for (int64_t i = 0; i < y[2]; ++i)
        for (int64_t j = 0; j < y[3]; ++j)
          for (int64_t c = 0; c < group_c; ++c)
            for (int64_t p = 0; p < w[2]; ++p)
              for (int64_t q = 0; q < w[3]; ++q) {
                int64_t row = i * g.stride_h - g.pad_t + p * g.dilation_h;
                int64_t col = j * g.stride_w - g.pad_l + q * g.dilation_w;
                if (row < 0 || row >= x[2] || col < 0 || col >= x[3]) continue;
                int64_t channel = (m / group_m) * group_c + c;
                visit(((n * x[1] + channel) * x[2] + row) * x[3] + col,
                      ((m * group_c + c) * w[2] + p) * w[3] + q, ((n * w[0] + m) * y[2] + i) * y[3] + j);
              }
}

// y = conv(x, w) + b; b is null for no bias.
Tensor ReferenceConv(const Tensor& x, const Tensor& w, const Tensor* b, const ConvGeometry& g) {
  Tensor y(ReferenceOutputShape(x.shape(), w.shape(), g), DataType::kFloat);
  float* yp = y.data<float>();
  int64_t plane = y.dim(2) * y.dim(3);
  for (int64_t k = 0; k < y.numel(); ++k) yp[k] = b ? b->data<float>()[k / plane % y.dim(1)] : 0.0f;
  ForEachTap(x.shape(), w.shape(), g, [&](int64_t xi, int64_t wi, int64_t yi) {
    yp[yi] += x.data<float>()[xi] * w.data<float>()[wi];
  });
  return y;
}

// The gradients of <y, dy> for y = conv(x, w) + b.
struct ConvGradients {
  Tensor dx, dw, db;
};

ConvGradients ReferenceConvGradient(const Tensor& x, const Tensor& w, const Tensor& dy,
                                    const ConvGeometry& g) {
  ConvGradients grads{Tensor(x.shape(), DataType::kFloat), Tensor(w.shape(), DataType::kFloat),
                      Tensor({w.dim(0)}, DataType::kFloat)};
  grads.dx.Zero();
  grads.dw.Zero();
  grads.db.Zero();
  const float* dyp = dy.data<float>();
  ForEachTap(x.shape(), w.shape(), g, [&](int64_t xi, int64_t wi, int64_t yi) {
    grads.dx.data<float>()[xi] += w.data<float>()[wi] * dyp[yi];
    grads.dw.data<float>()[wi] += x.data<float>()[xi] * dyp[yi];
  });
  int64_t plane = dy.dim(2) * dy.dim(3);
  for (int64_t k = 0; k < dy.numel(); ++k) grads.db.data<float>()[k / plane % dy.dim(1)] += dyp[k];
  return grads;
}

struct ConvCase {
  std::string name;
  Shape x, w;
  bool bias;
  std::vector<Arg> args;
  ConvGeometry geometry;
};

std::vector<ConvCase> Cases() {
  return {
      {"pad 1", {2, 3, 5, 5}, {4, 3, 3, 3}, true, {Arg("pad", 1)}, {1, 1, 1, 1, 1, 1}},
      {"stride 2, 3x2 kernel, pad_t/l/b/r",
       {1, 2, 7, 6},
       {3, 2, 3, 2},
       true,
       {Arg("stride", 2), Arg("pad_t", 1), Arg("pad_l", 0), Arg("pad_b", 2), Arg("pad_r", 1)},
       {2, 2, 1, 0, 2, 1}},
      {"group 2, dilation 2",
       {2, 4, 7, 7},
       {6, 2, 3, 3},
       false,
       {Arg("group", 2), Arg("dilation", 2), Arg("pad", 2)},
       {1, 1, 2, 2, 2, 2, 2, 2, 2}},
      {"list spellings",
       {1, 3, 6, 7},
       {2, 3, 2, 3},
       false,
       {Arg("kernels", std::vector<int>{2, 3}), Arg("strides", std::vector<int>{2, 1}),
        Arg("pads", std::vector<int>{0, 1, 1, 0}), Arg("dilations", std::vector<int>{1, 2})},
       {2, 1, 0, 1, 1, 0, 1, 2}},
      {"split spellings",
       {1, 2, 6, 6},
       {2, 2, 3, 1},
       true,
       {Arg("kernel_h", 3), Arg("kernel_w", 1), Arg("stride_h", 1), Arg("stride_w", 2), Arg("dilation_h", 2),
        Arg("dilation_w", 1)},
       {1, 2, 0, 0, 0, 0, 2, 1}},
  };
}

// Layers wide enough that oneDNN moves every tensor into its channel-blocked layouts. They are too large for
// the finite-difference checker, so their gradients are compared with direct loops instead.
std::vector<ConvCase> WideCases() {
  return {
      {"wide 1x1 stride 2", {2, 16, 6, 6}, {32, 16, 1, 1}, true, {Arg("stride", 2)}, {2, 2}},
      {"wide 3x3 pad 1", {2, 16, 8, 8}, {32, 16, 3, 3}, true, {Arg("pad", 1)}, {1, 1, 1, 1, 1, 1}},
      {"wide 3x3 group 2 stride 2",
       {2, 32, 7, 7},
       {32, 16, 3, 3},
       false,
       {Arg("group", 2), Arg("stride", 2)},
       {2, 2, 0, 0, 0, 0, 1, 1, 2}},
  };
}

OperatorDef ConvDef(const ConvCase& c) {
  std::vector<std::string> inputs{"x", "w"};
  if (c.bias) inputs.push_back("b");
  return MakeOperatorDef("Conv", inputs, {"y"}, c.args);
}

std::map<std::string, Tensor> ConvInputs(const ConvCase& c) {
  std::map<std::string, Tensor> inputs{{"x", RandomTensor(c.x, 1)}, {"w", RandomTensor(c.w, 2)}};
  if (c.bias) inputs["b"] = RandomTensor({c.w[0]}, 3);
  return inputs;
}

TEST(ConvOp, ForwardMatchesReference) {
  std::vector<ConvCase> cases = Cases();
  for (const auto& c : WideCases()) cases.push_back(c);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Workspace ws;
    auto inputs = ConvInputs(c);
    for (const auto& [name, value] : inputs) Feed(&ws, name, value);
    RunOp(&ws, ConvDef(c));
    ExpectNear(ws.Blob("y"),
               ReferenceConv(inputs["x"], inputs["w"], c.bias ? &inputs["b"] : nullptr, c.geometry), 1e-4f);
  }
}

TEST(ConvOp, RebuildsWhenTheInputShapeChanges) {
  Workspace ws;
  Tensor w = RandomTensor({4, 3, 3, 3}, 2);
  Feed(&ws, "w", w);
  auto op = CreateOperator(MakeOperatorDef("Conv", {"x", "w"}, {"y"}, {Arg("pad", 1)}), &ws);
  for (const Shape& shape : {Shape{1, 3, 5, 5}, Shape{3, 3, 8, 6}, Shape{1, 3, 5, 5}}) {
    SCOPED_TRACE(ShapeToString(shape));
    Tensor x = RandomTensor(shape, static_cast<unsigned>(shape[0]));
    Feed(&ws, "x", x);
    op->Run();
    ExpectNear(ws.Blob("y"), ReferenceConv(x, w, nullptr, {1, 1, 1, 1, 1, 1}), 1e-4f);
  }
}

TEST(ConvOp, Gradient) {
  for (const auto& c : Cases()) {
    SCOPED_TRACE(c.name);
    CheckGradient(ConvDef(c), ConvInputs(c));
  }
}

TEST(ConvOp, GradientMatchesReferenceOnWideLayers) {
  for (const auto& c : WideCases()) {
    SCOPED_TRACE(c.name);
    Workspace ws;
    auto inputs = ConvInputs(c);
    for (const auto& [name, value] : inputs) Feed(&ws, name, value);
    Tensor dy = RandomTensor(ReferenceOutputShape(c.x, c.w, c.geometry), 4);
    Feed(&ws, "dy", dy);
    std::vector<std::string> outputs{"dw", "dx"};
    std::vector<Arg> args = c.args;
    if (c.bias)
      outputs.insert(outputs.begin() + 1, "db");
    else
      args.emplace_back("no_bias", 1);
    RunOp(&ws, MakeOperatorDef("ConvGradient", {"x", "w", "dy"}, outputs, args));
    ConvGradients expected = ReferenceConvGradient(inputs["x"], inputs["w"], dy, c.geometry);
    ExpectNear(ws.Blob("dx"), expected.dx, 1e-4f);
    ExpectNear(ws.Blob("dw"), expected.dw, 1e-4f);
    if (c.bias) ExpectNear(ws.Blob("db"), expected.db, 1e-4f);
  }
}

TEST(ConvOp, GradientOfSomeInputsOnly) {
  // Frozen filter and bias (no_dweight, no_bias), bias only (dW to scratch), filter only.
  ConvCase c = Cases()[0];
  for (std::vector<int> inputs : {std::vector<int>{0}, std::vector<int>{2}, std::vector<int>{1}}) {
    SCOPED_TRACE(inputs[0]);
    GradientCheckOptions options;
    options.inputs_to_check = inputs;
    CheckGradient(ConvDef(c), ConvInputs(c), options);
  }
}

TEST(ConvOp, FilterInABackendLayoutIsReadPlain) {
  Workspace ws;
  Feed(&ws, "x", RandomTensor({2, 16, 6, 6}, 1));
  // A filter that is itself a convolution's output arrives blocked; its Copy is plain.
  Feed(&ws, "w_source", RandomTensor({32, 8, 3, 3}, 2));
  Feed(&ws, "k", RandomTensor({16, 8, 1, 1}, 3));
  RunOp(&ws, MakeOperatorDef("Conv", {"w_source", "k"}, {"w_blocked"}));
  RunOp(&ws, MakeOperatorDef("Copy", {"w_blocked"}, {"w_plain"}));
  ASSERT_FALSE(ws.Blob("w_blocked").is_plain());
  Feed(&ws, "dy", RandomTensor({2, 32, 6, 6}, 4));
  for (const std::string w : {"w_blocked", "w_plain"}) {
    RunOp(&ws, MakeOperatorDef("Conv", {"x", w}, {w + "_y"}, {Arg("pad", 1)}));
    RunOp(&ws, MakeOperatorDef("ConvGradient", {"x", w, "dy"}, {w + "_dw", w + "_dx"},
                               {Arg("pad", 1), Arg("no_bias", 1)}));
  }
  EXPECT_TRUE(ws.Blob("w_blocked_dw").is_plain());
  ExpectNear(ws.Blob("w_blocked_y"), ws.Blob("w_plain_y"), 1e-5f);
  ExpectNear(ws.Blob("w_blocked_dw"), ws.Blob("w_plain_dw"), 1e-5f);
  ExpectNear(ws.Blob("w_blocked_dx"), ws.Blob("w_plain_dx"), 1e-5f);
}

TEST(ConvOp, GradientOpLooksLikeCaffe2s) {
  NetDef net;
  *net.add_op() = MakeOperatorDef("Conv", {"data", "w", "b"}, {"y"}, {Arg("kernel", 3)});
  AddGradientOperators(&net, {"y"}, {"w", "b"});
  const OperatorDef& grad = net.op(net.op_size() - 1);
  EXPECT_EQ(grad.type(), "ConvGradient");
  EXPECT_EQ(std::vector<std::string>(grad.input().begin(), grad.input().end()),
            (std::vector<std::string>{"data", "w", "y_grad"}));
  EXPECT_EQ(std::vector<std::string>(grad.output().begin(), grad.output().end()),
            (std::vector<std::string>{"w_grad", "b_grad"}));
  EXPECT_EQ(GetIntArgument(grad, "kernel", 0), 3);
  EXPECT_FALSE(HasArgument(grad, "no_bias"));
  EXPECT_FALSE(HasArgument(grad, "no_dweight"));
}

TEST(ConvOp, InfersShapes) {
  NetDef net;
  *net.add_op() = MakeOperatorDef("Conv", {"x", "w", "b"}, {"y"},
                                  {Arg("stride", 2), Arg("pad_t", 1), Arg("pad_l", 0), Arg("pad_b", 2),
                                   Arg("pad_r", 1), Arg("group", 2), Arg("dilation", 2)});
  *net.add_op() = MakeOperatorDef("ConvGradient", {"x", "w", "dy"}, {"dw", "db", "dx"}, {Arg("stride", 2)});
  auto shapes = InferNetShapes(
      net, {{"x", {{2, 4, 9, 8}}}, {"w", {{6, 2, 3, 2}}}, {"b", {{6}}}, {"dy", {{2, 6, 4, 4}}}});
  // OH = floor((9 + 3 - 2*2 - 1) / 2) + 1 = 4, OW = floor((8 + 1 - 2*1 - 1) / 2) + 1 = 4.
  EXPECT_EQ(shapes["y"].dims, (Shape{2, 6, 4, 4}));
  EXPECT_EQ(shapes["dw"].dims, (Shape{6, 2, 3, 2}));
  EXPECT_EQ(shapes["db"].dims, (Shape{6}));
  EXPECT_EQ(shapes["dx"].dims, (Shape{2, 4, 9, 8}));
}

TEST(ConvOp, RejectsMismatchedShapes) {
  auto expect_invalid = [](const OperatorDef& def, const Shape& x, const Shape& w,
                           const std::string& fragment) {
    Workspace ws;
    Feed(&ws, "x", RandomTensor(x, 1));
    Feed(&ws, "w", RandomTensor(w, 2));
    try {
      RunOp(&ws, def);
      ADD_FAILURE() << "expected InvalidInput mentioning '" << fragment << "'";
    } catch (const InvalidInput& error) {
      EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
    }
    NetDef net;
    *net.add_op() = def;
    EXPECT_THROW(InferNetShapes(net, {{"x", {x}}, {"w", {w}}}), InvalidInput);
  };
  auto conv = MakeOperatorDef("Conv", {"x", "w"}, {"y"});
  expect_invalid(conv, {1, 3, 5, 5}, {4, 2, 3, 3}, "channels per group");
  expect_invalid(MakeOperatorDef("Conv", {"x", "w"}, {"y"}, {Arg("group", 2)}), {1, 4, 5, 5}, {4, 4, 3, 3},
                 "channels per group");
  expect_invalid(MakeOperatorDef("Conv", {"x", "w"}, {"y"}, {Arg("kernel", 5)}), {1, 3, 5, 5}, {4, 3, 3, 3},
                 "does not match filter");
  expect_invalid(conv, {1, 3, 2, 2}, {4, 3, 3, 3}, "does not fit");
  expect_invalid(conv, {3, 5, 5}, {4, 3, 3, 3}, "(N, C, H, W)");
}

}  // namespace
}  // namespace lockstep::testing
