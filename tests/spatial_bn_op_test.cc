// SpatialBN: training and test forward against a reference loop, running-statistics update, gradients,
// blocked-layout inputs against plain ones, and the fused relu=1 form against SpatialBN followed by Relu.
#include <cmath>

#include "lockstep/ops/dnnl_utils.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

struct BatchStats {
  std::vector<float> mean, var;  // biased variance
};

// x is (N, C, H, W) or (N, C)
BatchStats ReferenceStats(const Tensor& x) {
  int64_t n = x.dim(0), c = x.dim(1), hw = x.SizeFromDim(2);
  BatchStats stats{std::vector<float>(c, 0.f), std::vector<float>(c, 0.f)};
  const float* data = x.data<float>();
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0, sum_sq = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < hw; ++k) sum += data[(i * c + ch) * hw + k];
    double mean = sum / (n * hw);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < hw; ++k) sum_sq += std::pow(data[(i * c + ch) * hw + k] - mean, 2);
    stats.mean[ch] = static_cast<float>(mean);
    stats.var[ch] = static_cast<float>(sum_sq / (n * hw));
  }
  return stats;
}

Tensor ReferenceNormalize(const Tensor& x, const Tensor& scale, const Tensor& bias,
                          const std::vector<float>& mean, const std::vector<float>& var, float epsilon) {
  int64_t c = x.dim(1), hw = x.SizeFromDim(2);
  Tensor y(x.shape(), DataType::kFloat);
  for (int64_t j = 0; j < x.numel(); ++j) {
    int64_t ch = (j / hw) % c;
    y.data<float>()[j] =
        (x.data<float>()[j] - mean[ch]) / std::sqrt(var[ch] + epsilon) * scale.data<float>()[ch] +
        bias.data<float>()[ch];
  }
  return y;
}

OperatorDef TrainingBN(float momentum = 0.9f) {
  return MakeOperatorDef("SpatialBN", {"x", "scale", "bias", "rm", "rv"},
                         {"y", "rm", "rv", "saved_mean", "saved_var"},
                         {Arg("momentum", momentum), Arg("epsilon", 1e-5f)});
}

void FeedBN(Workspace* ws, const Shape& x_shape) {
  int64_t c = x_shape[1];
  Feed(ws, "x", RandomTensor(x_shape, 1, -2.f, 3.f));
  Feed(ws, "scale", RandomTensor({c}, 2, 0.5f, 1.5f));
  Feed(ws, "bias", RandomTensor({c}, 3));
  Feed(ws, "rm", RandomTensor({c}, 4));
  Feed(ws, "rv", RandomTensor({c}, 5, 0.5f, 2.f));
}

OperatorDef FusedTrainingBN() {
  return MakeOperatorDef("SpatialBN", {"x", "scale", "bias", "rm", "rv"},
                         {"y", "rm", "rv", "saved_mean", "saved_var", "mask"},
                         {Arg("epsilon", 1e-5f), Arg("relu", 1)});
}

// Each channel of x holds +-0.2, +-0.6, +-1.0, ... (zero mean), so training BN outputs with a small bias stay
// farther from the ReLU kink than finite-difference steps move them. shape's N*H*W must be even.
Tensor AwayFromKink(const Shape& shape) {
  Tensor x(shape, DataType::kFloat);
  int64_t c = shape[1], hw = x.SizeFromDim(2);
  for (int64_t j = 0; j < x.numel(); ++j) {
    int64_t index_in_channel = (j / (c * hw)) * hw + j % hw;
    float magnitude = 0.2f + 0.4f * static_cast<float>(index_in_channel / 2);
    x.data<float>()[j] = index_in_channel % 2 == 0 ? magnitude : -magnitude;
  }
  return x;
}

}  // namespace

TEST(SpatialBNOp, TrainingForwardAndRunningStats) {
  for (Shape shape : {Shape{4, 3, 5, 2}, Shape{6, 4}}) {
    Workspace ws;
    FeedBN(&ws, shape);
    std::vector<float> old_mean = Values(ws.Blob("rm")), old_var = Values(ws.Blob("rv"));
    RunOp(&ws, TrainingBN(0.8f));
    BatchStats stats = ReferenceStats(ws.Blob("x"));
    ExpectNear(
        ws.Blob("y"),
        ReferenceNormalize(ws.Blob("x"), ws.Blob("scale"), ws.Blob("bias"), stats.mean, stats.var, 1e-5f),
        1e-4f);
    int64_t c = shape[1];
    ExpectNear(ws.Blob("saved_mean"), TensorFromValues({c}, stats.mean), 1e-5f);
    ExpectNear(ws.Blob("saved_var"), TensorFromValues({c}, stats.var), 1e-5f);
    std::vector<float> mean(c), var(c);
    for (int64_t ch = 0; ch < c; ++ch) {
      mean[ch] = 0.8f * old_mean[ch] + 0.2f * stats.mean[ch];
      var[ch] = 0.8f * old_var[ch] + 0.2f * stats.var[ch];
    }
    ExpectNear(ws.Blob("rm"), TensorFromValues({c}, mean), 1e-5f);
    ExpectNear(ws.Blob("rv"), TensorFromValues({c}, var), 1e-5f);
  }
}

TEST(SpatialBNOp, TestModeUsesRunningStats) {
  Workspace ws;
  FeedBN(&ws, {2, 3, 4, 4});
  RunOp(&ws, MakeOperatorDef("SpatialBN", {"x", "scale", "bias", "rm", "rv"}, {"y"},
                             {Arg("is_test", 1), Arg("epsilon", 1e-3f)}));
  ExpectNear(ws.Blob("y"),
             ReferenceNormalize(ws.Blob("x"), ws.Blob("scale"), ws.Blob("bias"), Values(ws.Blob("rm")),
                                Values(ws.Blob("rv")), 1e-3f),
             1e-5f);
}

TEST(SpatialBNOp, RejectsWrongChannelCount) {
  Workspace ws;
  FeedBN(&ws, {2, 3, 4, 4});
  Feed(&ws, "scale", RandomTensor({4}, 2));
  EXPECT_THROW(RunOp(&ws, TrainingBN()), InvalidInput);
}

TEST(SpatialBNOp, TrainingGradient) {
  GradientCheckOptions options;
  options.inputs_to_check = {0, 1, 2};
  options.outputs_with_grad = {0};
  options.step = 1e-3f;
  for (Shape shape : {Shape{2, 2, 2, 2}, Shape{4, 2}}) {
    int64_t c = shape[1];
    CheckGradient(TrainingBN(),
                  {{"x", RandomTensor(shape, 11)},
                   {"scale", RandomTensor({c}, 12, 0.5f, 1.5f)},
                   {"bias", RandomTensor({c}, 13)},
                   {"rm", RandomTensor({c}, 14)},
                   {"rv", RandomTensor({c}, 15, 0.5f, 2.f)}},
                  options);
  }
}

TEST(SpatialBNOp, TrainingGradientOfXOnly) {
  GradientCheckOptions options;
  options.inputs_to_check = {0};
  options.step = 1e-3f;
  CheckGradient(TrainingBN(),
                {{"x", RandomTensor({2, 2, 2, 2}, 21)},
                 {"scale", RandomTensor({2}, 22, 0.5f, 1.5f)},
                 {"bias", RandomTensor({2}, 23)},
                 {"rm", RandomTensor({2}, 24)},
                 {"rv", RandomTensor({2}, 25, 0.5f, 2.f)}},
                options);
}

TEST(SpatialBNOp, TestModeGradient) {
  GradientCheckOptions options;
  options.inputs_to_check = {0, 1, 2};
  CheckGradient(MakeOperatorDef("SpatialBN", {"x", "scale", "bias", "rm", "rv"}, {"y"}, {Arg("is_test", 1)}),
                {{"x", RandomTensor({2, 3, 2, 2}, 31)},
                 {"scale", RandomTensor({3}, 32, 0.5f, 1.5f)},
                 {"bias", RandomTensor({3}, 33)},
                 {"rm", RandomTensor({3}, 34)},
                 {"rv", RandomTensor({3}, 35, 0.5f, 2.f)}},
                options);
}

// C = 20 pads the last block of 16 channels.
TEST(SpatialBNOp, BlockedInputMatchesPlain) {
  for (Shape shape : {Shape{4, 32, 5, 3}, Shape{3, 20, 4, 4}}) {
    for (bool is_test : {false, true}) {
      auto def = is_test ? MakeOperatorDef("SpatialBN", {"x", "scale", "bias", "rm", "rv"}, {"y"},
                                           {Arg("is_test", 1)})
                         : TrainingBN();
      Workspace plain, blocked;
      FeedBN(&plain, shape);
      FeedBN(&blocked, shape);
      Feed(&blocked, "x", Blocked(plain.Blob("x")));
      RunOp(&plain, def);
      RunOp(&blocked, def);
      EXPECT_FALSE(blocked.Blob("y").is_plain());
      ExpectNear(blocked.Blob("y"), plain.Blob("y"), 1e-5f);
      if (is_test) continue;
      for (const char* name : {"rm", "rv", "saved_mean", "saved_var"})
        ExpectNear(blocked.Blob(name), plain.Blob(name), 1e-5f);
    }
  }
}

// dY comes plain (reordered to X's layout) or blocked; dX keeps X's layout; dscale and dbias stay plain.
TEST(SpatialBNOp, GradientOfBlockedInputMatchesPlain) {
  Shape shape{3, 20, 4, 4};
  for (bool blocked_dy : {false, true}) {
    for (std::vector<int64_t> gradients : {std::vector<int64_t>{0, 1, 2}, std::vector<int64_t>{0}}) {
      std::vector<std::string> outputs{"dx", "dscale", "dbias"};
      outputs.resize(gradients.size());
      auto def = MakeOperatorDef("SpatialBNGradient", {"x", "scale", "dy", "saved_mean", "saved_var"},
                                 outputs, {Arg("gradients", gradients)});
      Workspace plain, blocked;
      FeedBN(&plain, shape);
      RunOp(&plain, TrainingBN());
      Feed(&plain, "dy", RandomTensor(shape, 7));
      for (const char* name : {"scale", "saved_mean", "saved_var"}) Feed(&blocked, name, plain.Blob(name));
      Feed(&blocked, "x", Blocked(plain.Blob("x")));
      Feed(&blocked, "dy", blocked_dy ? Blocked(plain.Blob("dy")) : plain.Blob("dy"));
      RunOp(&plain, def);
      RunOp(&blocked, def);
      EXPECT_FALSE(blocked.Blob("dx").is_plain());
      ExpectNear(blocked.Blob("dx"), plain.Blob("dx"), 1e-5f);
      for (size_t i = 1; i < outputs.size(); ++i)
        ExpectNear(blocked.Blob(outputs[i]), plain.Blob(outputs[i]), 1e-5f);
    }
  }
}

// relu=1 computes relu(BN(X)) with the same statistics as SpatialBN then Relu, in either layout of X.
TEST(SpatialBNOp, FusedReluMatchesSpatialBNThenRelu) {
  for (Shape shape : {Shape{4, 32, 5, 3}, Shape{3, 20, 4, 4}}) {
    for (bool blocked : {false, true}) {
      for (bool is_test : {false, true}) {
        std::vector<Arg> args{Arg("is_test", is_test), Arg("epsilon", 1e-5f)};
        std::vector<std::string> outputs{"y"};
        if (!is_test) outputs.insert(outputs.end(), {"rm", "rv", "saved_mean", "saved_var"});
        auto unfused = MakeOperatorDef("SpatialBN", {"x", "scale", "bias", "rm", "rv"}, outputs, args);
        args.emplace_back("relu", 1);
        if (!is_test) outputs.push_back("mask");
        auto fused = MakeOperatorDef("SpatialBN", {"x", "scale", "bias", "rm", "rv"}, outputs, args);
        Workspace expected, actual;
        FeedBN(&expected, shape);
        FeedBN(&actual, shape);
        if (blocked) {
          Feed(&expected, "x", Blocked(expected.Blob("x")));
          Feed(&actual, "x", Blocked(actual.Blob("x")));
        }
        RunOp(&expected, unfused);
        RunOp(&expected, MakeOperatorDef("Relu", {"y"}, {"y"}));
        RunOp(&actual, fused);
        EXPECT_EQ(actual.Blob("y").is_plain(), !blocked);
        ExpectNear(actual.Blob("y"), expected.Blob("y"), 1e-5f);
        if (is_test) continue;
        for (const char* name : {"rm", "rv", "saved_mean", "saved_var"})
          ExpectNear(actual.Blob(name), expected.Blob(name), 1e-5f);
        EXPECT_EQ(actual.Blob("mask").dtype(), DataType::kUInt8);
        EXPECT_GT(actual.Blob("mask").numel(), 0);
      }
    }
  }
}

// The fused gradient equals ReluGradient then SpatialBNGradient, for plain and blocked X and dY, with all
// gradients or dX alone.
TEST(SpatialBNOp, FusedReluGradientMatchesReluGradientThenSpatialBNGradient) {
  Shape shape{3, 20, 4, 4};
  for (bool blocked : {false, true}) {
    for (std::vector<int64_t> gradients : {std::vector<int64_t>{0, 1, 2}, std::vector<int64_t>{0}}) {
      std::vector<std::string> outputs{"dx", "dscale", "dbias"};
      outputs.resize(gradients.size());
      Workspace expected, actual;
      for (Workspace* ws : {&expected, &actual}) {
        FeedBN(ws, shape);
        if (blocked) Feed(ws, "x", Blocked(ws->Blob("x")));
        Tensor dy = RandomTensor(shape, 7);
        Feed(ws, "dy", blocked ? Blocked(dy) : dy);
      }
      RunOp(&expected, TrainingBN());
      RunOp(&expected, MakeOperatorDef("Relu", {"y"}, {"y"}));
      RunOp(&expected, MakeOperatorDef("ReluGradient", {"y", "dy"}, {"dy_masked"}));
      RunOp(&expected,
            MakeOperatorDef("SpatialBNGradient", {"x", "scale", "dy_masked", "saved_mean", "saved_var"},
                            outputs, {Arg("gradients", gradients)}));
      RunOp(&actual, FusedTrainingBN());
      RunOp(&actual,
            MakeOperatorDef("SpatialBNGradient", {"x", "scale", "dy", "saved_mean", "saved_var", "mask"},
                            outputs, {Arg("gradients", gradients), Arg("relu", 1)}));
      EXPECT_EQ(actual.Blob("dx").is_plain(), !blocked);
      for (const auto& name : outputs) ExpectNear(actual.Blob(name), expected.Blob(name), 1e-5f);
    }
  }
}

TEST(SpatialBNOp, FusedReluGradient) {
  GradientCheckOptions options;
  options.inputs_to_check = {0, 1, 2};
  options.step = 1e-3f;
  for (Shape shape : {Shape{2, 3, 2, 2}, Shape{4, 2}}) {
    int64_t c = shape[1];
    CheckGradient(FusedTrainingBN(),
                  {{"x", AwayFromKink(shape)},
                   {"scale", RandomTensor({c}, 42, 0.5f, 1.5f)},
                   {"bias", RandomTensor({c}, 43, -0.05f, 0.05f)},
                   {"rm", RandomTensor({c}, 44)},
                   {"rv", RandomTensor({c}, 45, 0.5f, 2.f)}},
                  options);
  }
}

TEST(SpatialBNOp, FusedReluRejectsMismatchedArity) {
  Workspace ws;
  FeedBN(&ws, {2, 3, 4, 4});
  // Training with relu=1 needs the mask output.
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("SpatialBN", {"x", "scale", "bias", "rm", "rv"},
                                          {"y", "rm", "rv", "saved_mean", "saved_var"}, {Arg("relu", 1)})),
               InvalidInput);
  RunOp(&ws, FusedTrainingBN());
  Feed(&ws, "dy", RandomTensor({2, 3, 4, 4}, 8));
  EXPECT_THROW(
      RunOp(&ws, MakeOperatorDef("SpatialBNGradient", {"x", "scale", "dy", "saved_mean", "saved_var"}, {"dx"},
                                 {Arg("gradients", std::vector<int64_t>{0}), Arg("relu", 1)})),
      InvalidInput);
  // A mask of the wrong size (here one from a different X) is refused, not read out of bounds.
  Feed(&ws, "mask", Tensor(Shape{3}, DataType::kUInt8));
  EXPECT_THROW(
      RunOp(&ws, MakeOperatorDef("SpatialBNGradient", {"x", "scale", "dy", "saved_mean", "saved_var", "mask"},
                                 {"dx"}, {Arg("gradients", std::vector<int64_t>{0}), Arg("relu", 1)})),
      InvalidInput);
  // Test-mode nets keep no mask, so the fused test-mode op has no gradient.
  auto test_mode = MakeOperatorDef("SpatialBN", {"x", "scale", "bias", "rm", "rv"}, {"y"},
                                   {Arg("is_test", 1), Arg("relu", 1)});
  GradientContext context{test_mode, {"y_grad"}, {"x_grad", "", "", "", ""}};
  EXPECT_THROW((*GradientRegistry::Find("SpatialBN"))(context), InvalidInput);
}

TEST(SpatialBNOp, ShapeInference) {
  NetDef net;
  *net.add_op() = TrainingBN();
  auto shapes = InferNetShapes(
      net, {{"x", {{4, 3, 5, 5}}}, {"scale", {{3}}}, {"bias", {{3}}}, {"rm", {{3}}}, {"rv", {{3}}}});
  EXPECT_EQ(shapes["y"].dims, (Shape{4, 3, 5, 5}));
  EXPECT_EQ(shapes["saved_var"].dims, (Shape{3}));

  NetDef fused;
  *fused.add_op() = FusedTrainingBN();
  shapes = InferNetShapes(
      fused, {{"x", {{4, 3, 5, 5}}}, {"scale", {{3}}}, {"bias", {{3}}}, {"rm", {{3}}}, {"rv", {{3}}}});
  EXPECT_EQ(shapes["y"].dims, (Shape{4, 3, 5, 5}));
  EXPECT_EQ(shapes["mask"].dtype, DataType::kUInt8);
  ASSERT_EQ(shapes["mask"].dims.size(), 1u);
  EXPECT_GT(shapes["mask"].dims[0], 0);
}

// On a CUDA device the mask is one byte per element of X, in any dtype the GPU computes in (float16
// included, which oneDNN's CPU batch norm, where the CPU mask's size comes from, does not take).
TEST(SpatialBNOp, CudaMaskShapeIsOneBytePerElement) {
  OperatorDef def = FusedTrainingBN();
  SetDevice(&def, {DeviceType::kCuda, 0});
  const TensorShape per_channel{{3}, DataType::kFloat};
  for (DataType type : {DataType::kFloat, DataType::kFloat16, DataType::kBFloat16}) {
    const std::vector<TensorShape> out = SchemaRegistry::Of(def).InferShapes(
        def, {{{2, 3, 5, 5}, type}, per_channel, per_channel, per_channel, per_channel});
    ASSERT_EQ(out.size(), 6u);
    EXPECT_EQ(out[5].dims, Shape{150}) << DataTypeName(type);
    EXPECT_EQ(out[5].dtype, DataType::kUInt8);
  }
}

}  // namespace lockstep::testing
