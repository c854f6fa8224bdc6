// Fill operators: constant values and dtypes, shapes from arguments or an input, random fill statistics,
// Xavier/MSRA scales and seeding.
#include <cmath>

#include "lockstep/core/schema.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

struct Moments {
  double mean = 0, stddev = 0, min = INFINITY, max = -INFINITY;
};

Moments Measure(const Tensor& tensor) {
  Moments m;
  auto values = Values(tensor);
  for (float v : values) {
    m.mean += v;
    m.min = std::min<double>(m.min, v);
    m.max = std::max<double>(m.max, v);
  }
  m.mean /= values.size();
  for (float v : values) m.stddev += (v - m.mean) * (v - m.mean);
  m.stddev = std::sqrt(m.stddev / values.size());
  return m;
}

Tensor Fill(const OperatorDef& def) {
  Workspace ws;
  RunOp(&ws, def);
  return ws.Blob(def.output(0));
}

}  // namespace

TEST(FillOps, ConstantFillFloatFromShapeArgument) {
  Tensor out = Fill(
      MakeOperatorDef("ConstantFill", {}, {"y"}, {Arg("shape", std::vector<int>{2, 3}), Arg("value", 2.5f)}));
  EXPECT_EQ(out.shape(), (Shape{2, 3}));
  EXPECT_EQ(Values(out), std::vector<float>(6, 2.5f));
}

TEST(FillOps, ConstantFillDefaultsToZero) {
  Tensor out = Fill(MakeOperatorDef("ConstantFill", {}, {"y"}, {Arg("shape", std::vector<int>{4})}));
  EXPECT_EQ(Values(out), std::vector<float>(4, 0.0f));
}

TEST(FillOps, ConstantFillIntegerDtypes) {
  Tensor i32 = Fill(MakeOperatorDef("ConstantFill", {}, {"y"},
                                    {Arg("shape", std::vector<int>{3}), Arg("dtype", 2), Arg("value", -7)}));
  ASSERT_EQ(i32.dtype(), DataType::kInt32);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(i32.data<int32_t>()[i], -7);

  // A large int64 survives exactly (it would not through float).
  const int64_t big = (int64_t{1} << 40) + 1;
  Tensor i64 = Fill(MakeOperatorDef("ConstantFill", {}, {"y"},
                                    {Arg("shape", std::vector<int>{}), Arg("dtype", 10), Arg("value", big)}));
  ASSERT_EQ(i64.dtype(), DataType::kInt64);
  EXPECT_EQ(i64.shape(), Shape{});
  EXPECT_EQ(*i64.data<int64_t>(), big);
}

TEST(FillOps, ConstantFillTakesTheShapeOfItsInput) {
  // The autodiff seeds a loss gradient this way, from a scalar loss.
  Workspace ws;
  Feed(&ws, "loss", TensorFromValues({}, {3.0f}));
  Feed(&ws, "x", RandomTensor({2, 5}, 1));
  RunOp(&ws, MakeOperatorDef("ConstantFill", {"loss"}, {"loss_grad"}, {Arg("value", 1.0f)}));
  RunOp(&ws, MakeOperatorDef("ConstantFill", {"x"}, {"x_ones"}, {Arg("value", 1.0f)}));
  EXPECT_EQ(ws.Blob("loss_grad").shape(), Shape{});
  EXPECT_EQ(Values(ws.Blob("loss_grad")), std::vector<float>{1.0f});
  EXPECT_EQ(ws.Blob("x_ones").shape(), (Shape{2, 5}));
  EXPECT_EQ(Values(ws.Blob("x_ones")), std::vector<float>(10, 1.0f));
}

TEST(FillOps, ShapeInference) {
  NetDef net;
  *net.add_op() =
      MakeOperatorDef("ConstantFill", {}, {"iter"}, {Arg("shape", std::vector<int>{1}), Arg("dtype", 10)});
  *net.add_op() = MakeOperatorDef("XavierFill", {}, {"w"}, {Arg("shape", std::vector<int>{8, 3, 3, 3})});
  *net.add_op() = MakeOperatorDef("ConstantFill", {"loss"}, {"loss_grad"}, {Arg("value", 1.0f)});
  auto shapes = InferNetShapes(net, {{"loss", {Shape{}, DataType::kFloat}}});
  EXPECT_EQ(shapes["iter"].dims, Shape{1});
  EXPECT_EQ(shapes["iter"].dtype, DataType::kInt64);
  EXPECT_EQ(shapes["w"].dims, (Shape{8, 3, 3, 3}));
  EXPECT_EQ(shapes["loss_grad"].dims, Shape{});
}

TEST(FillOps, RejectsUnsupportedDtype) {
  Workspace ws;
  EXPECT_THROW(CreateOperator(MakeOperatorDef("ConstantFill", {}, {"y"}, {Arg("dtype", 7)}), &ws),
               InvalidInput);
  EXPECT_THROW(CreateOperator(MakeOperatorDef("GaussianFill", {}, {"y"}, {Arg("dtype", 10)}), &ws),
               InvalidInput);
}

TEST(FillOps, GaussianStatistics) {
  Tensor out =
      Fill(MakeOperatorDef("GaussianFill", {}, {"y"},
                           {Arg("shape", std::vector<int>{100, 1000}), Arg("mean", 3.0f), Arg("std", 2.0f)}));
  Moments m = Measure(out);
  EXPECT_NEAR(m.mean, 3.0, 0.03);
  EXPECT_NEAR(m.stddev, 2.0, 0.03);
}

TEST(FillOps, UniformStatisticsAndBounds) {
  Tensor out =
      Fill(MakeOperatorDef("UniformFill", {}, {"y"},
                           {Arg("shape", std::vector<int>{100000}), Arg("min", -1.0f), Arg("max", 3.0f)}));
  Moments m = Measure(out);
  EXPECT_GE(m.min, -1.0);
  EXPECT_LT(m.max, 3.0);
  EXPECT_NEAR(m.mean, 1.0, 0.02);
  EXPECT_NEAR(m.stddev, 4.0 / std::sqrt(12.0), 0.02);
}

TEST(FillOps, XavierScaleFromFanIn) {
  // fan_in = 16 * 5 * 5 = 400, so values are uniform in +-sqrt(3 / 400).
  Tensor out =
      Fill(MakeOperatorDef("XavierFill", {}, {"w"}, {Arg("shape", std::vector<int>{256, 16, 5, 5})}));
  const double scale = std::sqrt(3.0 / 400.0);
  Moments m = Measure(out);
  EXPECT_GE(m.min, -scale);
  EXPECT_LE(m.max, scale);
  EXPECT_GT(m.max, 0.99 * scale);
  EXPECT_LT(m.min, -0.99 * scale);
  EXPECT_NEAR(m.mean, 0.0, 0.002);
  EXPECT_NEAR(m.stddev, scale / std::sqrt(3.0), 0.01 * scale);
}

TEST(FillOps, MSRAStdFromFanOut) {
  // fan_out = numel / shape[1] = 64 * 3 * 3 = 576, so std = sqrt(2 / 576).
  Tensor out = Fill(MakeOperatorDef("MSRAFill", {}, {"w"}, {Arg("shape", std::vector<int>{64, 256, 3, 3})}));
  const double stddev = std::sqrt(2.0 / 576.0);
  Moments m = Measure(out);
  EXPECT_NEAR(m.mean, 0.0, 0.01 * stddev);
  EXPECT_NEAR(m.stddev, stddev, 0.01 * stddev);
}

TEST(FillOps, FanFillsNeedEnoughDims) {
  Workspace ws;
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("MSRAFill", {}, {"w"}, {Arg("shape", std::vector<int>{10})})),
               InvalidInput);
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("XavierFill", {}, {"w"}, {Arg("shape", std::vector<int>{})})),
               InvalidInput);
}

TEST(FillOps, RandomFillsFollowTheirSeed) {
  for (const char* type : {"GaussianFill", "UniformFill", "XavierFill", "MSRAFill"}) {
    SCOPED_TRACE(type);
    auto def = [&](int seed) {
      return MakeOperatorDef(type, {}, {"w"}, {Arg("shape", std::vector<int>{4, 3, 2}), Arg("seed", seed)});
    };
    EXPECT_EQ(Values(Fill(def(5))), Values(Fill(def(5))));
    EXPECT_NE(Values(Fill(def(5))), Values(Fill(def(6))));
    // The device option's seed wins over the argument.
    OperatorDef seeded = def(5);
    seeded.mutable_device_option()->set_random_seed(6);
    EXPECT_EQ(Values(Fill(seeded)), Values(Fill(def(6))));
  }
}

// Without a seed (the Basics tutorial's fills), each fill draws its own values, as in Caffe2: two fills of
// one net, and one fill created twice, differ; seed 0 given is a seed like any other.
TEST(FillOps, UnseededFillsDrawDifferentValues) {
  const OperatorDef unseeded =
      MakeOperatorDef("GaussianFill", {}, {"w"}, {Arg("shape", std::vector<int>{8})});
  EXPECT_NE(Values(Fill(unseeded)), Values(Fill(unseeded)));
  const OperatorDef zero =
      MakeOperatorDef("GaussianFill", {}, {"w"}, {Arg("shape", std::vector<int>{8}), Arg("seed", 0)});
  EXPECT_EQ(Values(Fill(zero)), Values(Fill(zero)));
}

TEST(FillOps, RerunContinuesTheSequence) {
  Workspace ws;
  auto op = CreateOperator(
      MakeOperatorDef("GaussianFill", {}, {"w"}, {Arg("shape", std::vector<int>{8}), Arg("seed", 3)}), &ws);
  op->Run();
  auto first = Values(ws.Blob("w"));
  op->Run();
  EXPECT_NE(Values(ws.Blob("w")), first);
}

TEST(FillOps, GivenTensorFillGivesItsValuesInRowMajorOrder) {
  Tensor out = Fill(
      MakeOperatorDef("GivenTensorFill", {}, {"y"},
                      {Arg("shape", std::vector<int>{2, 2}), Arg("values", std::vector<float>{1, 2, 3, 4})}));
  EXPECT_EQ(out.shape(), (Shape{2, 2}));
  EXPECT_EQ(Values(out), (std::vector<float>{1, 2, 3, 4}));
  Workspace ws;
  EXPECT_THROW(
      RunOp(&ws, MakeOperatorDef("GivenTensorFill", {}, {"y"},
                                 {Arg("shape", std::vector<int>{3}), Arg("values", std::vector<float>{1})})),
      InvalidInput);
}

TEST(FillOps, RunOnceFillsAtTheFirstRunOnly) {
  Workspace ws;
  auto op =
      CreateOperator(MakeOperatorDef("GaussianFill", {}, {"w"},
                                     {Arg("shape", std::vector<int>{8}), Arg("seed", 3), Arg("run_once", 1)}),
                     &ws);
  op->Run();
  auto first = Values(ws.Blob("w"));
  ws.GetBlob("w")->data<float>()[0] = 42.0f;  // a training step's update, which a second run must keep
  first[0] = 42.0f;
  op->Run();
  EXPECT_EQ(Values(ws.Blob("w")), first);
}

TEST(FillOps, FillWithInputShape) {
  Workspace ws;
  Feed(&ws, "x", RandomTensor({3, 7}, 2));
  RunOp(&ws, MakeOperatorDef("UniformFill", {"x"}, {"y"}, {Arg("min", 5.0f), Arg("max", 6.0f)}));
  EXPECT_EQ(ws.Blob("y").shape(), (Shape{3, 7}));
  for (float v : Values(ws.Blob("y"))) {
    EXPECT_GE(v, 5.0f);
    EXPECT_LT(v, 6.0f);
  }
}

}  // namespace lockstep::testing
