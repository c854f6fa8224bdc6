// MaxPool and AveragePool against a direct loop (stride, pads, non-square windows, count_include_pad, global
// pooling), their gradients by finite differences, shape inference and argument errors.
#include <algorithm>
#include <limits>
#include <numeric>
#include <random>

#include "lockstep/core/schema.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

struct PoolGeometry {
  int64_t kernel_h, kernel_w;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_t = 0, pad_l = 0, pad_b = 0, pad_r = 0;
  bool include_pad = false;
};

// x is (N, C, H, W); returns y (N, C, OH, OW). Average divides by the window's in-bounds count, or by the
// kernel area with include_pad.
Tensor ReferencePool(const Tensor& x, bool max, const PoolGeometry& g) {
  int64_t n_size = x.dim(0), c_size = x.dim(1), h_size = x.dim(2), w_size = x.dim(3);
  int64_t out_h = (h_size + g.pad_t + g.pad_b - g.kernel_h) / g.stride_h + 1;
  int64_t out_w = (w_size + g.pad_l + g.pad_r - g.kernel_w) / g.stride_w + 1;
  Tensor y({n_size, c_size, out_h, out_w}, DataType::kFloat);
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  for (int64_t plane = 0; plane < n_size * c_size; ++plane)
    for (int64_t i = 0; i < out_h; ++i)
      for (int64_t j = 0; j < out_w; ++j) {
        float best = -std::numeric_limits<float>::infinity();
        double sum = 0;
        int count = 0;
        for (int64_t p = 0; p < g.kernel_h; ++p)
          for (int64_t q = 0; q < g.kernel_w; ++q) {
            int64_t row = i * g.stride_h - g.pad_t + p, col = j * g.stride_w - g.pad_l + q;
            if (row < 0 || row >= h_size || col < 0 || col >= w_size) continue;
            float value = xp[(plane * h_size + row) * w_size + col];
            best = std::max(best, value);
            sum += value;
            ++count;
          }
        int64_t divisor = g.include_pad ? g.kernel_h * g.kernel_w : count;
        yp[(plane * out_h + i) * out_w + j] = max ? best : static_cast<float>(sum / divisor);
      }
  return y;
}

// Distinct values 0.05 apart in shuffled order, so no max window has a tie a finite-difference step could
// flip.
Tensor DistinctTensor(const Shape& shape, unsigned seed) {
  Tensor x(shape, DataType::kFloat);
  std::vector<int> order(x.numel());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 0.05f * (order[i] - x.numel() / 2);
  return x;
}

struct PoolCase {
  std::string name;
  std::string type;
  Shape x;
  std::vector<Arg> args;
  PoolGeometry geometry;  // kernel 0 means the whole plane
};

std::vector<PoolCase> Cases() {
  return {
      {"max 2x2 stride 2", "MaxPool", {2, 3, 6, 6}, {Arg("kernel", 2), Arg("stride", 2)}, {2, 2, 2, 2}},
      {"max 3x3 stride 2 pad 1",
       "MaxPool",
       {1, 2, 7, 6},
       {Arg("kernel", 3), Arg("stride", 2), Arg("pad", 1)},
       {3, 3, 2, 2, 1, 1, 1, 1}},
      {"max 2x3 split spellings",
       "MaxPool",
       {1, 2, 5, 7},
       {Arg("kernel_h", 2), Arg("kernel_w", 3), Arg("stride_h", 1), Arg("stride_w", 2), Arg("pad_t", 1),
        Arg("pad_l", 0), Arg("pad_b", 0), Arg("pad_r", 2)},
       {2, 3, 1, 2, 1, 0, 0, 2}},
      {"average 3x3 stride 2 pad 1",
       "AveragePool",
       {2, 2, 7, 7},
       {Arg("kernel", 3), Arg("stride", 2), Arg("pad", 1)},
       {3, 3, 2, 2, 1, 1, 1, 1}},
      {"average count_include_pad",
       "AveragePool",
       {2, 2, 7, 7},
       {Arg("kernel", 3), Arg("stride", 2), Arg("pad", 1), Arg("count_include_pad", 1)},
       {3, 3, 2, 2, 1, 1, 1, 1, true}},
      {"average list spellings",
       "AveragePool",
       {1, 3, 6, 5},
       {Arg("kernels", std::vector<int>{3, 2}), Arg("strides", std::vector<int>{1, 2}),
        Arg("pads", std::vector<int>{1, 0, 2, 1})},
       {3, 2, 1, 2, 1, 0, 2, 1}},
      {"max global", "MaxPool", {2, 3, 5, 4}, {Arg("global_pooling", 1)}, {0, 0}},
      {"average global", "AveragePool", {2, 3, 5, 4}, {Arg("global_pooling", 1)}, {0, 0}},
  };
}

TEST(PoolOp, ForwardMatchesReference) {
  for (const auto& c : Cases()) {
    SCOPED_TRACE(c.name);
    Workspace ws;
    Tensor x = DistinctTensor(c.x, 1);
    Feed(&ws, "x", x);
    RunOp(&ws, MakeOperatorDef(c.type, {"x"}, {"y"}, c.args));
    PoolGeometry g = c.geometry;
    if (g.kernel_h == 0) {
      g.kernel_h = c.x[2];
      g.kernel_w = c.x[3];
    }
    ExpectNear(ws.Blob("y"), ReferencePool(x, c.type == "MaxPool", g), 1e-5f);
  }
}

TEST(PoolOp, Gradient) {
  for (const auto& c : Cases()) {
    SCOPED_TRACE(c.name);
    CheckGradient(MakeOperatorDef(c.type, {"x"}, {"y"}, c.args), {{"x", DistinctTensor(c.x, 2)}});
  }
}

TEST(PoolOp, PlainInputGivesPlainOutputs) {
  for (const auto& c : Cases()) {
    SCOPED_TRACE(c.name);
    Workspace ws;
    Feed(&ws, "x", RandomTensor(c.x, 1));
    RunOp(&ws, MakeOperatorDef(c.type, {"x"}, {"y"}, c.args));
    RunOp(&ws, MakeOperatorDef(c.type + "Gradient", {"x", "y", "y"}, {"dx"}, c.args));
    EXPECT_TRUE(ws.Blob("y").is_plain());
    EXPECT_TRUE(ws.Blob("dx").is_plain());
  }
}

TEST(PoolOp, BlockedInputKeepsItsLayoutAndMatchesPlain) {
  for (const auto& c : Cases()) {
    SCOPED_TRACE(c.name);
    Workspace ws;
    // A 1x1 convolution leaves its 16 output channels in a blocked layout; a Copy of it is plain.
    Feed(&ws, "input", RandomTensor({c.x[0], 16, c.x[2], c.x[3]}, 1));
    Feed(&ws, "w", RandomTensor({16, 16, 1, 1}, 2));
    RunOp(&ws, MakeOperatorDef("Conv", {"input", "w"}, {"blocked"}));
    RunOp(&ws, MakeOperatorDef("Copy", {"blocked"}, {"plain"}));
    ASSERT_FALSE(ws.Blob("blocked").is_plain());
    for (const std::string x : {"blocked", "plain"})
      RunOp(&ws, MakeOperatorDef(c.type, {x}, {x + "_y"}, c.args));
    Feed(&ws, "dy", RandomTensor(ws.Blob("plain_y").shape(), 3));
    for (const std::string x : {"blocked", "plain"})
      RunOp(&ws, MakeOperatorDef(c.type + "Gradient", {x, x + "_y", "dy"}, {x + "_dx"}, c.args));
    EXPECT_FALSE(ws.Blob("blocked_y").is_plain());
    EXPECT_FALSE(ws.Blob("blocked_dx").is_plain());
    ExpectNear(ws.Blob("blocked_y"), ws.Blob("plain_y"), 1e-5f);
    ExpectNear(ws.Blob("blocked_dx"), ws.Blob("plain_dx"), 1e-5f);
  }
}

TEST(PoolOp, InfersShapes) {
  NetDef net;
  *net.add_op() =
      MakeOperatorDef("MaxPool", {"x"}, {"pooled"}, {Arg("kernel", 3), Arg("stride", 2), Arg("pad", 1)});
  *net.add_op() = MakeOperatorDef("AveragePool", {"pooled"}, {"global"}, {Arg("global_pooling", 1)});
  *net.add_op() = MakeOperatorDef("MaxPoolGradient", {"x", "pooled", "pooled"}, {"dx"},
                                  {Arg("kernel", 3), Arg("stride", 2), Arg("pad", 1)});
  auto shapes = InferNetShapes(net, {{"x", {{2, 64, 112, 112}}}});
  EXPECT_EQ(shapes["pooled"].dims, (Shape{2, 64, 56, 56}));
  EXPECT_EQ(shapes["global"].dims, (Shape{2, 64, 1, 1}));
  EXPECT_EQ(shapes["dx"].dims, (Shape{2, 64, 112, 112}));
}

TEST(PoolOp, RejectsBadArguments) {
  auto expect_invalid = [](const std::vector<Arg>& args, const std::string& fragment) {
    Workspace ws;
    Feed(&ws, "x", RandomTensor({1, 2, 6, 6}, 1));
    try {
      RunOp(&ws, MakeOperatorDef("MaxPool", {"x"}, {"y"}, args));
      ADD_FAILURE() << "expected InvalidInput mentioning '" << fragment << "'";
    } catch (const InvalidInput& error) {
      EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
    }
  };
  expect_invalid({}, "needs 'kernel'");
  expect_invalid({Arg("kernel", 2), Arg("dilation", 2)}, "dilation");
  expect_invalid({Arg("kernel", 2), Arg("pad", 2)}, "smaller than");
  expect_invalid({Arg("global_pooling", 1), Arg("kernel", 2)}, "global_pooling");
  expect_invalid({Arg("kernel", 2), Arg("stride", 0)}, "argument 'stride' must be at least 1, got 0");
  expect_invalid({Arg("kernel", 2), Arg("kernel_h", 2)}, "only one of");
  expect_invalid({Arg("kernel", 2), Arg("order", "NHWC")}, "NCHW");
  expect_invalid({Arg("kernel", 2), Arg("pad_t", 1)},
                 "'pad_t', 'pad_l', 'pad_b' and 'pad_r' must be given together");
}

}  // namespace
}  // namespace lockstep::testing
