// The cases of the cross-backend operator table: every CPU operator type, with the argument variants that
// take different paths in a backend (stride, padding, dilation and groups; training and test mode; optional
// inputs and outputs; in-place forms), on small inputs from fixed seeds.
#include "op_cases.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <set>

#include "lockstep/core/half.h"
#include "lockstep/core/schema.h"
#include "lockstep/data/batch_reader.h"
#include "op_case_table.h"

namespace lockstep::testing {
namespace {

Tensor Int64Tensor(const Shape& shape, const std::vector<int64_t>& values) {
  Tensor tensor(shape, DataType::kInt64);
  std::copy(values.begin(), values.end(), tensor.data<int64_t>());
  return tensor;
}

// Labels in [0, classes) from a fixed seed.
Tensor Labels(const Shape& shape, int classes, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> values(NumElements(shape));
  for (auto& value : values) value = static_cast<int32_t>(rng() % classes);
  return Int32Tensor(shape, values);
}

// A Dropout mask: 1 with probability `keep`.
Tensor Mask(const Shape& shape, float keep, unsigned seed) {
  Tensor tensor(shape, DataType::kUInt8);
  std::mt19937 rng(seed);
  std::bernoulli_distribution kept(keep);
  for (int64_t i = 0; i < tensor.numel(); ++i) tensor.data<uint8_t>()[i] = kept(rng);
  return tensor;
}

// uint8 images (N, H, W, C), as the input pipeline reads them.
Tensor Images(const Shape& shape, unsigned seed) {
  Tensor tensor(shape, DataType::kUInt8);
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < tensor.numel(); ++i) tensor.data<uint8_t>()[i] = static_cast<uint8_t>(rng() >> 24);
  return tensor;
}

// Magnitudes from 1e-8 to 1e5 with both signs: float16's subnormals and overflow, bfloat16's rounding.
Tensor WideRange(const Shape& shape, unsigned seed) {
  Tensor tensor(shape, DataType::kFloat);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> exponent(-8.f, 5.f);
  for (int64_t i = 0; i < tensor.numel(); ++i)
    tensor.data<float>()[i] = (i % 2 ? -1.f : 1.f) * std::pow(10.f, exponent(rng));
  return tensor;
}

Tensor Scalar(float value) { return TensorFromValues({}, {value}); }

// Checks a training Dropout's outputs: the mask is 0 or 1, kept values are x / (1 - ratio), dropped ones are
// 0, and the fraction dropped is near `ratio` (x must hold no zeros).
std::function<void(const Blobs&, const Blobs&)> DropoutDraws(float ratio, const std::string& x_name,
                                                             const std::string& y_name) {
  return [=](const Blobs& inputs, const Blobs& outputs) {
    const Tensor& x = inputs.at(x_name);
    const Tensor& y = outputs.at(y_name);
    const Tensor& mask = outputs.at("mask");
    ASSERT_EQ(y.dtype(), DataType::kFloat);
    ASSERT_EQ(mask.dtype(), DataType::kUInt8);
    ASSERT_EQ(y.shape(), x.shape());
    ASSERT_EQ(mask.shape(), x.shape());
    const float scale = 1.f / (1.f - ratio);
    int64_t dropped = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      uint8_t keep = mask.data<uint8_t>()[i];
      ASSERT_TRUE(keep == 0 || keep == 1) << "mask[" << i << "] = " << int(keep);
      float expected = keep ? x.data<float>()[i] * scale : 0.f;
      ASSERT_NEAR(y.data<float>()[i], expected, kElementwise * std::max(1.f, std::fabs(expected)))
          << "at " << i << " (mask " << int(keep) << ")";
      dropped += !keep;
    }
    // The standard deviation of the fraction is sqrt(ratio (1 - ratio) / n) < 0.002 for 65536 draws.
    EXPECT_NEAR(static_cast<double>(dropped) / x.numel(), ratio, 0.01);
  };
}

void AddDataMovement(Table& t) {
  t.Add("Copy_Float", MakeOperatorDef("Copy", {"x"}, {"y"}), {{"x", RandomTensor({3, 4}, 1)}}, kExact);
  t.Add("Copy_Int32", MakeOperatorDef("Copy", {"x"}, {"y"}), {{"x", Labels({7}, 100, 2)}}, kExact);
  t.Add("Copy_Int64", MakeOperatorDef("Copy", {"x"}, {"y"}), {{"x", Int64Tensor({2}, {-5, 1LL << 40})}},
        kExact);

  const Tensor wide = WideRange({4, 64}, 3);
  auto cast = [](int to) { return MakeOperatorDef("Cast", {"x"}, {"y"}, {Arg("to", to)}); };
  t.Add("Cast_FloatToFloat16", cast(12), {{"x", wide}}, kExact);
  t.Add("Cast_FloatToBFloat16", cast(16), {{"x", wide}}, kExact);
  t.Add("Cast_FloatToFloat", cast(1), {{"x", wide}}, kExact);
  t.Add("Cast_Float16ToFloat", cast(1), {{"x", Narrowed(wide, DataType::kFloat16)}}, kExact);
  t.Add("Cast_BFloat16ToFloat", cast(1), {{"x", Narrowed(wide, DataType::kBFloat16)}}, kExact);
  t.Add("Cast_Float16ToBFloat16", cast(16), {{"x", Narrowed(wide, DataType::kFloat16)}}, kExact);
  t.Add("Cast_ToTheDtypeOfInput1", MakeOperatorDef("Cast", {"x", "like"}, {"y"}),
        {{"x", wide}, {"like", Narrowed(RandomTensor({2}, 4), DataType::kFloat16)}}, kExact);

  for (int axis : {0, 1, 2, -1}) {
    int a = axis < 0 ? axis + 3 : axis;
    Blobs inputs;
    for (int i = 0; i < 3; ++i) {
      Shape shape{2, 3, 4};
      shape[a] = i + 1;
      inputs["x" + std::to_string(i)] = RandomTensor(shape, 10 + i);
    }
    t.Add("Concat_Axis" + std::string(axis < 0 ? "Minus1" : std::to_string(axis)),
          MakeOperatorDef("Concat", {"x0", "x1", "x2"}, {"y", "split_info"}, {Arg("axis", axis)}), inputs,
          kExact);
  }
  t.Add("Concat_OneInput", MakeOperatorDef("Concat", {"x"}, {"y", "split_info"}),
        {{"x", RandomTensor({2, 3}, 13)}}, kExact);
  t.Add("Concat_Int32", MakeOperatorDef("Concat", {"a", "b"}, {"y", "split_info"}, {Arg("axis", 0)}),
        {{"a", Labels({2, 3}, 50, 14)}, {"b", Labels({1, 3}, 50, 15)}}, kExact);

  t.Add("Split_EqualPieces", MakeOperatorDef("Split", {"x"}, {"p", "q", "r"}),
        {{"x", RandomTensor({2, 6, 3}, 20)}}, kExact);
  t.Add("Split_Axis0ArgSplit",
        MakeOperatorDef("Split", {"x"}, {"p", "q"}, {Arg("axis", 0), Arg("split", Ints{1, 3})}),
        {{"x", RandomTensor({4, 2, 3}, 21)}}, kExact);
  t.Add("Split_ExtentsFromInput", MakeOperatorDef("Split", {"x", "split_info"}, {"p", "q", "r"}),
        {{"x", RandomTensor({2, 6, 3}, 22)}, {"split_info", Int32Tensor({3}, {2, 1, 3})}}, kExact);
  t.Add("Split_SomeParts",
        MakeOperatorDef("Split", {"x"}, {"p", "r"},
                        {Arg("axis", 2), Arg("split", Ints{1, 2, 3}), Arg("parts", Ints{0, 2})}),
        {{"x", RandomTensor({2, 3, 6}, 23)}}, kExact);
  t.Add("Split_AxisMinus1", MakeOperatorDef("Split", {"x"}, {"p", "q"}, {Arg("axis", -1)}),
        {{"x", RandomTensor({3, 2, 4}, 24)}}, kExact);

  const Tensor x = RandomTensor({2, 3, 4, 5}, 30);
  t.Add("Flatten_Axis1", MakeOperatorDef("Flatten", {"x"}, {"y"}), {{"x", x}}, kExact);
  t.Add("Flatten_Axis0", MakeOperatorDef("Flatten", {"x"}, {"y"}, {Arg("axis", 0)}), {{"x", x}}, kExact);
  t.Add("FlattenToVec", MakeOperatorDef("FlattenToVec", {"x"}, {"y"}), {{"x", x}}, kExact);
  t.Add("StopGradient", MakeOperatorDef("StopGradient", {"x"}, {"y"}), {{"x", x}}, kExact);
  t.Add("StopGradient_InPlace", MakeOperatorDef("StopGradient", {"x"}, {"x"}), {{"x", x}}, kExact);
  t.Add("Flatten_Axis3InPlace", MakeOperatorDef("Flatten", {"x"}, {"x"}, {Arg("axis", 3)}), {{"x", x}},
        kExact);
  t.Add("Reshape_ArgShapeWithOldShape",
        MakeOperatorDef("Reshape", {"x"}, {"y", "old_shape"}, {Arg("shape", Ints{0, -1, 2})}),
        {{"x", RandomTensor({2, 3, 4}, 31)}}, kExact);
  t.Add("Reshape_Int64ShapeInput", MakeOperatorDef("Reshape", {"x", "shape"}, {"y"}),
        {{"x", RandomTensor({2, 3, 4}, 32)}, {"shape", Int64Tensor({2}, {4, 6})}}, kExact);
  t.Add("Reshape_Int32ShapeInputInPlace", MakeOperatorDef("Reshape", {"x", "shape"}, {"x", "old_shape"}),
        {{"x", RandomTensor({2, 3, 4}, 33)}, {"shape", Int32Tensor({1}, {-1})}}, kExact);
  t.Add("ResizeLike", MakeOperatorDef("ResizeLike", {"a", "b"}, {"c"}),
        {{"a", RandomTensor({6, 4}, 34)}, {"b", RandomTensor({2, 3, 4}, 35)}}, kExact);

  using Floats = std::vector<float>;
  const Blobs images{{"images", Images({2, 5, 6, 3}, 36)}};
  t.Add("NormalizeImages_Defaults", MakeOperatorDef("NormalizeImages", {"images"}, {"data"}), images,
        kElementwise);
  t.Add("NormalizeImages_PerChannel",
        MakeOperatorDef(
            "NormalizeImages", {"images"}, {"data"},
            {Arg("mean", Floats{123.675f, 116.28f, 103.53f}), Arg("std", Floats{58.395f, 57.12f, 57.375f})}),
        images, kElementwise);
  t.Add("NormalizeImages_OneValueForAllChannels",
        MakeOperatorDef("NormalizeImages", {"images"}, {"data"},
                        {Arg("mean", Floats{127.5f}), Arg("std", Floats{58.f})}),
        images, kElementwise);

  auto reader = [](Workspace* ws) {
    // 3x8x8 images of 10 classes; 2 replicas of 4 images each.
    auto source = std::make_shared<SyntheticSource>(3, 8, 10, /*seed=*/5);
    ws->SetObject("reader", std::make_shared<BatchReader>(source, 4, 2));
  };
  // The second run reads replica 1's slice of the second global batch.
  OpCase& read =
      t.Add("ReadBatch_Replica1",
            MakeOperatorDef("ReadBatch", {}, {"data", "label"}, {Arg("reader", "reader"), Arg("replica", 1)}),
            {}, kExact);
  read.prepare = reader;
  read.runs = 2;
}

void AddElementwise(Table& t) {
  const Tensor a = RandomTensor({2, 3, 4, 5}, 40), b = RandomTensor({2, 3, 4, 5}, 41);
  t.Add("Add", MakeOperatorDef("Add", {"a", "b"}, {"c"}), {{"a", a}, {"b", b}}, kElementwise);
  t.Add("Add_InPlaceOnA", MakeOperatorDef("Add", {"a", "b"}, {"a"}), {{"a", a}, {"b", b}}, kElementwise);
  t.Add("Add_InPlaceOnB", MakeOperatorDef("Add", {"a", "b"}, {"b"}), {{"a", a}, {"b", b}}, kElementwise);
  t.Add("Add_Relu", MakeOperatorDef("Add", {"a", "b"}, {"c"}, {Arg("relu", 1)}), {{"a", a}, {"b", b}},
        kElementwise);
  t.Add("Add_BroadcastTwoDims", MakeOperatorDef("Add", {"a", "b"}, {"c"}, {Arg("broadcast", 1)}),
        {{"a", a}, {"b", RandomTensor({4, 5}, 42)}}, kElementwise);
  t.Add("Add_BroadcastLastDim", MakeOperatorDef("Add", {"a", "b"}, {"a"}, {Arg("broadcast", 1)}),
        {{"a", a}, {"b", RandomTensor({5}, 43)}}, kElementwise);

  t.Add("Sum_OneInput", MakeOperatorDef("Sum", {"x0"}, {"y"}), {{"x0", a}}, kElementwise);
  t.Add("Sum_FourInputs", MakeOperatorDef("Sum", {"x0", "x1", "x2", "x3"}, {"y"}),
        {{"x0", a}, {"x1", b}, {"x2", RandomTensor(a.shape(), 44)}, {"x3", RandomTensor(a.shape(), 45)}},
        kElementwise);
  t.Add("Sum_InPlace", MakeOperatorDef("Sum", {"x0", "x1"}, {"x0"}), {{"x0", a}, {"x1", b}}, kElementwise);

  t.Add("Scale", MakeOperatorDef("Scale", {"x"}, {"y"}, {Arg("scale", 0.25f)}), {{"x", a}}, kElementwise);
  t.Add("Scale_DefaultIsACopy", MakeOperatorDef("Scale", {"x"}, {"y"}), {{"x", a}}, kElementwise);
  t.Add("Scale_InPlace", MakeOperatorDef("Scale", {"x"}, {"x"}, {Arg("scale", -3.f)}), {{"x", a}},
        kElementwise);

  t.Add("SumReduceLike_LeadingDim", MakeOperatorDef("SumReduceLike", {"dy", "b"}, {"db"}),
        {{"dy", RandomTensor({4, 3, 5}, 46)}, {"b", RandomTensor({3, 5}, 47)}}, kReduction);
  t.Add("SumReduceLike_ManyRows", MakeOperatorDef("SumReduceLike", {"dy", "b"}, {"db"}),
        {{"dy", RandomTensor({300, 7}, 48)}, {"b", RandomTensor({7}, 49)}}, kReduction);
  t.Add("SumReduceLike_NothingToReduce", MakeOperatorDef("SumReduceLike", {"dy", "b"}, {"db"}),
        {{"dy", RandomTensor({3, 5}, 50)}, {"b", RandomTensor({3, 5}, 51)}}, kReduction);

  t.Add("WeightedSum_OnePair", MakeOperatorDef("WeightedSum", {"x0", "w0"}, {"y"}),
        {{"x0", a}, {"w0", Scalar(-0.5f)}}, kElementwise);
  t.Add("WeightedSum_ThreePairsInPlace",
        MakeOperatorDef("WeightedSum", {"x0", "w0", "x1", "w1", "x2", "w2"}, {"x0"}),
        {{"x0", a},
         {"w0", Scalar(0.9f)},
         {"x1", b},
         {"w1", Scalar(-0.1f)},
         {"x2", RandomTensor(a.shape(), 52)},
         {"w2", Scalar(2.f)}},
        kElementwise);

  t.Add("Relu", MakeOperatorDef("Relu", {"x"}, {"y"}), {{"x", a}}, kElementwise);
  t.Add("Relu_InPlace", MakeOperatorDef("Relu", {"x"}, {"x"}), {{"x", RandomTensor({1000}, 53)}},
        kElementwise);
  OpCase& relu_gradient = t.Add("ReluGradient", MakeOperatorDef("ReluGradient", {"y", "dy"}, {"dx"}),
                                {{"x", a}, {"dy", b}}, kElementwise);
  relu_gradient.setup = {MakeOperatorDef("Relu", {"x"}, {"y"})};
  OpCase& relu_in_place = t.Add("ReluGradient_InPlace", MakeOperatorDef("ReluGradient", {"y", "dy"}, {"dy"}),
                                {{"x", a}, {"dy", b}}, kElementwise);
  relu_in_place.setup = {MakeOperatorDef("Relu", {"x"}, {"y"})};
  const OperatorDef leaky = MakeOperatorDef("LeakyRelu", {"x"}, {"y"}, {Arg("alpha", 0.2f)});
  t.Add("LeakyRelu", leaky, {{"x", a}}, kElementwise);
  OpCase& leaky_gradient = t.Add(
      "LeakyReluGradient", MakeOperatorDef("LeakyReluGradient", {"y", "dy"}, {"dx"}, {Arg("alpha", 0.2f)}),
      {{"x", a}, {"dy", b}}, kElementwise);
  leaky_gradient.setup = {leaky};
}

// The fills run twice: the second run continues the generator's sequence.
void AddFills(Table& t) {
  auto fill = [&](const std::string& name, OperatorDef op, Blobs inputs, unsigned seed) {
    if (seed) op.mutable_device_option()->set_random_seed(seed);
    t.Add(name, op, std::move(inputs), kExact).runs = 2;
  };
  fill("ConstantFill_Float",
       MakeOperatorDef("ConstantFill", {}, {"y"}, {Arg("shape", Ints{2, 3}), Arg("value", 1.5f)}), {}, 0);
  fill("ConstantFill_Int32",
       MakeOperatorDef("ConstantFill", {}, {"y"}, {Arg("shape", Ints{5}), Arg("value", 7), Arg("dtype", 2)}),
       {}, 0);
  fill("ConstantFill_Int64",
       MakeOperatorDef("ConstantFill", {}, {"y"}, {Arg("shape", Ints{}), Arg("value", 3), Arg("dtype", 10)}),
       {}, 0);
  fill("ConstantFill_ShapeOfInput", MakeOperatorDef("ConstantFill", {"like"}, {"y"}, {Arg("value", -2.f)}),
       {{"like", RandomTensor({4, 5}, 60)}}, 0);
  fill("GivenTensorFill",
       MakeOperatorDef(
           "GivenTensorFill", {}, {"y"},
           {Arg("shape", Ints{2, 3}), Arg("values", std::vector<float>{1, -2, 3.5f, 0, 7, -0.25f})}),
       {}, 0);
  fill("GaussianFill",
       MakeOperatorDef("GaussianFill", {}, {"y"},
                       {Arg("shape", Ints{64, 9}), Arg("mean", 1.f), Arg("std", 0.5f)}),
       {}, 11);
  fill("GaussianFill_SeedArgument",
       MakeOperatorDef("GaussianFill", {}, {"y"}, {Arg("shape", Ints{100}), Arg("seed", 12)}), {}, 0);
  fill("UniformFill",
       MakeOperatorDef("UniformFill", {}, {"y"},
                       {Arg("shape", Ints{32, 8}), Arg("min", -3.f), Arg("max", 2.f)}),
       {}, 13);
  fill("UniformFill_ShapeOfInput", MakeOperatorDef("UniformFill", {"like"}, {"y"}),
       {{"like", RandomTensor({3, 7}, 61)}}, 14);
  fill("XavierFill", MakeOperatorDef("XavierFill", {}, {"w"}, {Arg("shape", Ints{16, 8, 3, 3})}), {}, 15);
  fill("MSRAFill", MakeOperatorDef("MSRAFill", {}, {"w"}, {Arg("shape", Ints{16, 8, 3, 3})}), {}, 16);
}

void AddTrainingState(Table& t) {
  OpCase& iter =
      t.Add("Iter", MakeOperatorDef("Iter", {"iter"}, {"iter"}), {{"iter", Int64Tensor({}, {7})}}, kExact);
  iter.runs = 3;
  t.Add("Iter_ShapeOne", MakeOperatorDef("Iter", {"iter"}, {"iter"}), {{"iter", Int64Tensor({1}, {0})}},
        kExact);

  struct Schedule {
    std::string name;
    std::vector<Arg> args;
    std::vector<int64_t> iters;
  };
  const std::vector<Schedule> schedules{
      {"Fixed", {Arg("base_lr", 0.1f)}, {0, 1000}},
      {"Step",
       {Arg("base_lr", 0.2f), Arg("policy", "step"), Arg("stepsize", 10), Arg("gamma", 0.5f)},
       {9, 25}},
      {"Multistep",
       {Arg("base_lr", 1.f), Arg("policy", "multistep"), Arg("stepsizes", Ints{5, 10}), Arg("gamma", 0.1f)},
       {4, 5, 1000}},
      {"Exp", {Arg("base_lr", 0.5f), Arg("policy", "exp"), Arg("gamma", 0.99f)}, {0, 37}},
      {"Inv",
       {Arg("base_lr", 0.1f), Arg("policy", "inv"), Arg("gamma", 1e-4f), Arg("power", 0.75f)},
       {0, 12345}},
      {"Poly",
       {Arg("base_lr", 0.8f), Arg("policy", "poly"), Arg("max_iter", 100), Arg("power", 0.9f)},
       {30, 150}},
      {"Cosine", {Arg("base_lr", 0.4f), Arg("policy", "cosine"), Arg("max_iter", 100)}, {0, 25, 150}},
      {"Warmup",
       {Arg("base_lr", 2.f), Arg("warmup_iter", 10), Arg("warmup_start_factor", 0.25f)},
       {0, 4, 10}},
      {"StepWithWarmup",
       {Arg("base_lr", 1.f), Arg("policy", "step"), Arg("stepsize", 4), Arg("gamma", 0.5f),
        Arg("warmup_iter", 8)},
       {6}},
      {"CosineWithWarmup",
       {Arg("base_lr", 0.3f), Arg("policy", "cosine"), Arg("max_iter", 90), Arg("warmup_iter", 5)},
       {3}},
  };
  for (const auto& schedule : schedules)
    for (int64_t iter : schedule.iters)
      t.Add("LearningRate_" + schedule.name + "_Iter" + std::to_string(iter),
            MakeOperatorDef("LearningRate", {"iter"}, {"lr"}, schedule.args),
            {{"iter", Int64Tensor({}, {iter})}}, kElementwise);

  // Two steps, so that the second reads the momentum the first left.
  const Blobs state{{"grad", RandomTensor({4, 33}, 70)},
                    {"moment", RandomTensor({4, 33}, 71)},
                    {"lr", Scalar(0.1f)},
                    {"param", RandomTensor({4, 33}, 72)}};
  auto sgd = [&](const std::string& name, const std::vector<Arg>& args, const std::string& grad_out) {
    t.Add(name,
          MakeOperatorDef("MomentumSGDUpdate", {"grad", "moment", "lr", "param"},
                          {grad_out, "moment", "param"}, args),
          state, kElementwise)
        .runs = 2;
  };
  sgd("MomentumSGDUpdate", {Arg("momentum", 0.9f)}, "adjusted");
  sgd("MomentumSGDUpdate_Nesterov", {Arg("momentum", 0.9f), Arg("nesterov", 1)}, "adjusted");
  sgd("MomentumSGDUpdate_WeightDecay", {Arg("momentum", 0.9f), Arg("weight_decay", 1e-2f)}, "adjusted");
  sgd("MomentumSGDUpdate_NesterovWeightDecayInPlace",
      {Arg("momentum", 0.8f), Arg("nesterov", 1), Arg("weight_decay", 1e-2f)}, "grad");
  sgd("MomentumSGDUpdate_NoMomentum", {}, "adjusted");
}

void AddDropout(Table& t) {
  // Values in [0.5, 1): a dropped element is the only zero.
  const Tensor x = RandomTensor({256, 256}, 80, 0.5f, 1.f);
  t.Add("Dropout_TestMode", MakeOperatorDef("Dropout", {"x"}, {"y"}, {Arg("is_test", 1)}), {{"x", x}},
        kExact);
  t.Add("Dropout_TestModeWithMask", MakeOperatorDef("Dropout", {"x"}, {"y", "mask"}, {Arg("is_test", 1)}),
        {{"x", x}}, kExact);
  // Training draws differ between the backends' generators: each backend is checked on its own.
  for (float ratio : {0.3f, 0.5f}) {
    bool in_place = ratio == 0.5f;
    std::string y = in_place ? "x" : "y";
    OperatorDef op = MakeOperatorDef("Dropout", {"x"}, {y, "mask"}, {Arg("ratio", ratio)});
    op.mutable_device_option()->set_random_seed(81);
    OpCase& c = t.Add(in_place ? "Dropout_TrainingInPlace" : "Dropout_Training", op, {{"x", x}}, kExact);
    c.check = DropoutDraws(ratio, "x", y);
    c.runs = in_place ? 1 : 2;  // in place, a second run would drop from the first one's output
  }
  t.Add("DropoutGradient_Training",
        MakeOperatorDef("DropoutGradient", {"dy", "mask"}, {"dx"}, {Arg("ratio", 0.25f)}),
        {{"dy", RandomTensor({16, 40}, 82)}, {"mask", Mask({16, 40}, 0.75f, 83)}}, kElementwise);
  t.Add("DropoutGradient_TestMode", MakeOperatorDef("DropoutGradient", {"dy"}, {"dx"}, {Arg("is_test", 1)}),
        {{"dy", RandomTensor({16, 40}, 84)}}, kExact);
}

void AddClassification(Table& t) {
  const Tensor scores = RandomTensor({16, 10}, 90);
  t.Add("Accuracy_Top1", MakeOperatorDef("Accuracy", {"scores", "labels"}, {"accuracy"}),
        {{"scores", scores}, {"labels", Labels({16}, 10, 91)}}, kExact);
  t.Add("Accuracy_Top3LabelsNx1",
        MakeOperatorDef("Accuracy", {"scores", "labels"}, {"accuracy"}, {Arg("top_k", 3)}),
        {{"scores", scores}, {"labels", Labels({16, 1}, 10, 92)}}, kExact);

  const Blobs inputs{{"logits", RandomTensor({8, 10}, 93, -2.f, 2.f)}, {"labels", Labels({8}, 10, 94)}};
  auto forward = [](const std::vector<Arg>& args) {
    return MakeOperatorDef("SoftmaxWithLoss", {"logits", "labels"}, {"softmax", "loss"}, args);
  };
  t.Add("SoftmaxWithLoss", forward({}), inputs, kReduction);
  t.Add("SoftmaxWithLoss_Scale", forward({Arg("scale", 2.f)}), inputs, kReduction);
  t.Add("SoftmaxWithLoss_LabelsNx1", forward({}),
        {{"logits", RandomTensor({5, 7}, 95, -2.f, 2.f)}, {"labels", Labels({5, 1}, 7, 96)}}, kReduction);
  // Logits of +-50: the row maximum must be subtracted, and confident mistakes hit the probability floor.
  t.Add("SoftmaxWithLoss_LargeLogits", forward({}),
        {{"logits", RandomTensor({6, 1000}, 97, -50.f, 50.f)}, {"labels", Labels({6}, 1000, 98)}},
        kReduction);

  for (float dloss : {1.f, 0.5f}) {
    std::vector<Arg> args;
    if (dloss != 1.f) args.emplace_back("scale", 2.f);
    Blobs gradient_inputs = inputs;
    gradient_inputs["dloss"] = Scalar(dloss);
    OpCase& c = t.Add(dloss == 1.f ? "SoftmaxWithLossGradient" : "SoftmaxWithLossGradient_ScaleAndDloss",
                      MakeOperatorDef("SoftmaxWithLossGradient", {"logits", "labels", "softmax", "dloss"},
                                      {"dlogits"}, args),
                      gradient_inputs, kReduction);
    c.setup = {forward(args)};
  }
}

}  // namespace

// Values 0.05 apart in shuffled order, so that no pooling window holds a tie and both backends pick the same
// maximum.
Tensor Distinct(const Shape& shape, unsigned seed) {
  Tensor tensor(shape, DataType::kFloat);
  std::vector<int64_t> order(tensor.numel());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  for (int64_t i = 0; i < tensor.numel(); ++i)
    tensor.data<float>()[i] = 0.05f * (order[i] - tensor.numel() / 2);
  return tensor;
}

// Output extent of a window sweep: floor((size + 2 * pad - kernel) / stride) + 1.
int64_t Swept(int64_t size, int64_t kernel, int64_t stride, int64_t pad) {
  return (size + 2 * pad - kernel) / stride + 1;
}

std::vector<OpCase> OpCases() {
  Table t;
  AddDataMovement(t);
  AddElementwise(t);
  AddFills(t);
  AddTrainingState(t);
  AddDropout(t);
  AddClassification(t);
  AddConv(t);
  AddFc(t);
  AddPooling(t);
  AddBatchNorm(t);
  return t.Take();
}

std::vector<OpCase> LowPrecisionCases() {
  // clang-format off
  static const std::set<std::string> kTypes{
      "Conv", "ConvGradient", "FC", "FCGradient", "Relu", "ReluGradient", "MaxPool", "MaxPoolGradient",
      "AveragePool", "AveragePoolGradient", "SpatialBN", "SpatialBNGradient", "ChannelStats",
      "ChannelBackpropStats", "SpatialBNCombinedGradient", "Add", "Sum", "Scale", "Concat", "Split", "Flatten",
      "Reshape", "Copy"};
  // clang-format on
  // The GPU computes in float32 from the 16-bit values; its results round when stored, and some cuDNN
  // algorithms keep partial sums in the 16-bit type (bfloat16 backward-data convolution was seen 6 units in
  // the last place from the CPU): a few roundings of 2^-8 relative for bfloat16, of 2^-11 for float16.
  const std::pair<DataType, float> types[] = {{DataType::kFloat16, 4e-3f}, {DataType::kBFloat16, 3e-2f}};
  std::vector<OpCase> cases;
  for (const OpCase& base : OpCases()) {
    if (!kTypes.count(base.op.type()) || base.check || base.prepare) continue;
    for (const auto& [type, tolerance] : types) {
      OpCase c = base;
      c.name += type == DataType::kFloat16 ? "_Float16" : "_BFloat16";
      c.narrow_to = type;
      c.tolerance = tolerance;
      // The float32 inputs that the operator, or a setup operator making one of its inputs, takes in 16 bits.
      std::vector<OperatorDef> readers = c.setup;
      readers.push_back(c.op);
      for (const OperatorDef& reader : readers) {
        const OpSchema& schema = SchemaRegistry::Of(reader);
        for (int k = 0; k < reader.input_size(); ++k) {
          auto input = c.inputs.find(reader.input(k));
          if (input == c.inputs.end() || input->second.dtype() != DataType::kFloat ||
              !schema.AllowsLowPrecisionInput(k) ||
              std::count(c.narrowed.begin(), c.narrowed.end(), input->first))
            continue;
          input->second = Widened(Narrowed(input->second, type));
          c.narrowed.push_back(input->first);
        }
      }
      if (!c.narrowed.empty()) cases.push_back(std::move(c));
    }
  }
  return cases;
}

const std::map<std::string, std::string>& OperatorsWithoutCases() {
  static const std::map<std::string, std::string> excluded = [] {
    std::map<std::string, std::string> types{
        {"Allreduce", "needs a communicator over several devices: tests/cuda/nccl_communicator_test.cc"},
        {"Broadcast", "needs a communicator over several devices: tests/cuda/nccl_communicator_test.cc"},
        {"CreateCommonWorld", "writes a communicator, not a tensor: tests/cuda/nccl_communicator_test.cc"},
        {"CreateDB",
         "writes a data reader, not a tensor, the same on every device: tests/create_db_op_test.cc"},
        {"ImageInput",
         "reads a database through a workspace object, one class for every device: "
         "tests/create_db_op_test.cc"},
    };
    types.insert(CpuOnlyOperators().begin(), CpuOnlyOperators().end());
    return types;
  }();
  return excluded;
}

const std::vector<std::string>& TestOnlyOperators() {
  static const std::vector<std::string> types{
      "RecordThread",  // tests/data_parallel_test.cc: records which thread ran each replica
  };
  return types;
}

}  // namespace lockstep::testing
