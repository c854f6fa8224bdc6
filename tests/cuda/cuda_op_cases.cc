// The cases of the cross-backend operator table: every CPU operator type, with the argument variants that
// take different paths in a backend (stride, padding, dilation and groups; training and test mode; optional
// inputs and outputs; in-place forms), on small inputs from fixed seeds.
#include "cuda/cuda_op_cases.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>

#include "lockstep/core/half.h"
#include "lockstep/data/batch_reader.h"

namespace lockstep::testing {
namespace {

// Tolerances, relative to max(1, |value|) as ExpectNear reads them.
// Data movement (Copy, Concat, reshapes, fills, Cast, a reader) and counting (Accuracy, Iter) must agree
// exactly: the CUDA fills run the CPU fill, and Cast rounds to nearest even on both backends.
constexpr float kExact = 0;
// One or a few roundings per element; the GPU may contract a multiply and an add into one FMA, or divide
// where the CPU multiplies by a reciprocal, which moves a result by an ulp or two.
constexpr float kElementwise = 1e-5f;
// Sums over many elements in another order and, for softmax and normalization, exp, rsqrt and division
// that the two libraries compute differently: SpatialBN, channel statistics, softmax, pooling averages.
constexpr float kReduction = 1e-4f;
// cuDNN and cuBLAS in float32: other algorithms (implicit GEMM, Winograd, FFT) and summation orders. TF32
// tensor cores, which would need about 1e-2, are used only under enable_tensor_core, which no case sets.
constexpr float kMatmul = 1e-4f;

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

// Magnitudes from 1e-8 to 1e5 with both signs: float16's subnormals and overflow, bfloat16's rounding.
Tensor WideRange(const Shape& shape, unsigned seed) {
  Tensor tensor(shape, DataType::kFloat);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> exponent(-8.f, 5.f);
  for (int64_t i = 0; i < tensor.numel(); ++i)
    tensor.data<float>()[i] = (i % 2 ? -1.f : 1.f) * std::pow(10.f, exponent(rng));
  return tensor;
}

// x converted to float16 or bfloat16 on the host.
Tensor Narrowed(const Tensor& x, DataType type) {
  Tensor narrow(x.shape(), type);
  for (int64_t i = 0; i < x.numel(); ++i) {
    float value = x.data<float>()[i];
    if (type == DataType::kFloat16)
      narrow.data<Float16>()[i] = ToFloat16(value);
    else
      narrow.data<BFloat16>()[i] = ToBFloat16(value);
  }
  return narrow;
}

Tensor Scalar(float value) { return TensorFromValues({}, {value}); }

// Output extent of a window sweep: floor((size + 2 * pad - kernel) / stride) + 1.
int64_t Swept(int64_t size, int64_t kernel, int64_t stride, int64_t pad) {
  return (size + 2 * pad - kernel) / stride + 1;
}

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

class Table {
 public:
  OpCase& Add(const std::string& name, const OperatorDef& op, Blobs inputs, float tolerance) {
    OpCase c;
    c.name = name;
    c.op = op;
    c.inputs = std::move(inputs);
    c.tolerance = tolerance;
    cases_.push_back(std::move(c));
    return cases_.back();
  }
  std::vector<OpCase> Take() { return std::move(cases_); }

 private:
  std::vector<OpCase> cases_;
};

using Ints = std::vector<int>;

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

// A window sweep over (N, C, H, W): Conv's geometry, or a pooling's with the kernel given.
struct Window {
  int64_t kernel_h = 0, kernel_w = 0;  // pooling only; Conv takes its kernel from the filter
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation = 1;

  // The arguments in Caffe2's spellings, the single-value ones where both axes agree.
  std::vector<Arg> Args() const {
    std::vector<Arg> args;
    if (kernel_h == kernel_w && kernel_h > 0) args.emplace_back("kernel", kernel_h);
    if (kernel_h != kernel_w) args.insert(args.end(), {Arg("kernel_h", kernel_h), Arg("kernel_w", kernel_w)});
    if (stride_h == stride_w && stride_h != 1) args.emplace_back("stride", stride_h);
    if (stride_h != stride_w) args.insert(args.end(), {Arg("stride_h", stride_h), Arg("stride_w", stride_w)});
    if (pad_h == pad_w && pad_h != 0) args.emplace_back("pad", pad_h);
    if (pad_h != pad_w)
      args.insert(args.end(),
                  {Arg("pad_t", pad_h), Arg("pad_b", pad_h), Arg("pad_l", pad_w), Arg("pad_r", pad_w)});
    if (dilation != 1) args.emplace_back("dilation", dilation);
    return args;
  }
  // (N, channels, OH, OW) for an x of (N, C, H, W) and a kh x kw kernel.
  Shape Output(const Shape& x, int64_t channels, int64_t kh, int64_t kw) const {
    return {x[0], channels, Swept(x[2], dilation * (kh - 1) + 1, stride_h, pad_h),
            Swept(x[3], dilation * (kw - 1) + 1, stride_w, pad_w)};
  }
};

std::vector<Arg> With(std::vector<Arg> args, const std::vector<Arg>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

void AddConv(Table& t) {
  struct Geometry {
    std::string name;
    Shape x, w;
    int64_t group;
    Window window;
  };
  const std::vector<Geometry> geometries{
      {"Plain", {2, 3, 7, 7}, {4, 3, 3, 3}, 1, {}},
      {"Pad1", {2, 3, 7, 7}, {4, 3, 3, 3}, 1, {.pad_h = 1, .pad_w = 1}},
      {"Stride2Pad1", {2, 3, 8, 8}, {5, 3, 3, 3}, 1, {.stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1}},
      {"Dilation2", {1, 2, 9, 9}, {3, 2, 3, 3}, 1, {.pad_h = 2, .pad_w = 2, .dilation = 2}},
      {"Groups2", {2, 4, 6, 6}, {6, 2, 3, 3}, 2, {.pad_h = 1, .pad_w = 1}},
      {"Depthwise", {2, 8, 6, 6}, {8, 1, 3, 3}, 8, {.pad_h = 1, .pad_w = 1}},
      {"Kernel1Stride2", {2, 16, 8, 8}, {32, 16, 1, 1}, 1, {.stride_h = 2, .stride_w = 2}},
      // 16 channels and more: oneDNN works in its blocked layouts.
      {"SixteenChannels", {2, 16, 8, 8}, {16, 16, 3, 3}, 1, {.pad_h = 1, .pad_w = 1}},
      {"Rectangular", {1, 3, 6, 9}, {4, 3, 2, 4}, 1, {.stride_h = 1, .stride_w = 2, .pad_h = 1, .pad_w = 0}},
  };
  unsigned seed = 100;
  for (const auto& g : geometries) {
    std::vector<Arg> args = g.window.Args();
    if (g.group != 1) args.emplace_back("group", g.group);
    Shape y = g.window.Output(g.x, g.w[0], g.w[2], g.w[3]);
    Blobs inputs{{"x", RandomTensor(g.x, seed++)},
                 {"w", RandomTensor(g.w, seed++)},
                 {"b", RandomTensor({g.w[0]}, seed++)},
                 {"dy", RandomTensor(y, seed++)}};
    // Twice: the first run of a shape chooses cuDNN's algorithms (timing them in the output buffers), the
    // second reuses the choice.
    t.Add("Conv_" + g.name, MakeOperatorDef("Conv", {"x", "w", "b"}, {"y"}, args), inputs, kMatmul).runs = 2;
    t.Add("ConvGradient_" + g.name,
          MakeOperatorDef("ConvGradient", {"x", "w", "dy"}, {"dw", "db", "dx"}, args), inputs, kMatmul)
        .runs = 2;
    if (g.name == "Plain" || g.name == "Stride2Pad1") {
      t.Add("Conv_" + g.name + "NoBias", MakeOperatorDef("Conv", {"x", "w"}, {"y"}, args), inputs, kMatmul);
      t.Add("ConvGradient_" + g.name + "NoBias",
            MakeOperatorDef("ConvGradient", {"x", "w", "dy"}, {"dw", "dx"}, With(args, {Arg("no_bias", 1)})),
            inputs, kMatmul);
      t.Add("ConvGradient_" + g.name + "OnlyDx",
            MakeOperatorDef("ConvGradient", {"x", "w", "dy"}, {"dx"},
                            With(args, {Arg("no_bias", 1), Arg("no_dweight", 1)})),
            inputs, kMatmul);
      t.Add("ConvGradient_" + g.name + "NoDx",
            MakeOperatorDef("ConvGradient", {"x", "w", "dy"}, {"dw", "db"}, args), inputs, kMatmul);
    }
  }
}

void AddFc(Table& t) {
  struct Geometry {
    std::string name;
    Shape x, w, y;
    std::vector<Arg> args;
  };
  const std::vector<Geometry> geometries{
      {"Plain", {4, 6}, {5, 6}, {4, 5}, {}},
      {"FlattensAtAxis1", {3, 2, 4}, {5, 8}, {3, 5}, {}},
      {"Axis2", {2, 3, 4}, {5, 4}, {2, 3, 5}, {Arg("axis", 2)}},
      {"Large", {32, 128}, {64, 128}, {32, 64}, {}},
  };
  unsigned seed = 200;
  for (const auto& g : geometries) {
    Blobs inputs{{"x", RandomTensor(g.x, seed++)},
                 {"w", RandomTensor(g.w, seed++)},
                 {"b", RandomTensor({g.w[0]}, seed++)},
                 {"dy", RandomTensor(g.y, seed++)}};
    t.Add("FC_" + g.name, MakeOperatorDef("FC", {"x", "w", "b"}, {"y"}, g.args), inputs, kMatmul);
    t.Add("FCGradient_" + g.name, MakeOperatorDef("FCGradient", {"x", "w", "dy"}, {"dw", "db", "dx"}, g.args),
          inputs, kMatmul);
    if (g.name != "Plain") continue;
    t.Add("FCGradient_NoBias",
          MakeOperatorDef("FCGradient", {"x", "w", "dy"}, {"dw", "dx"}, With(g.args, {Arg("no_bias", 1)})),
          inputs, kMatmul);
    t.Add("FCGradient_OnlyDx",
          MakeOperatorDef("FCGradient", {"x", "w", "dy"}, {"dx"},
                          With(g.args, {Arg("no_bias", 1), Arg("no_dweight", 1)})),
          inputs, kMatmul);
    t.Add("FCGradient_OnlyDb",
          MakeOperatorDef("FCGradient", {"x", "w", "dy"}, {"db"}, With(g.args, {Arg("no_dweight", 1)})),
          inputs, kMatmul);
    t.Add("FCGradient_NoDx", MakeOperatorDef("FCGradient", {"x", "w", "dy"}, {"dw", "db"}, g.args), inputs,
          kMatmul);
  }
}

// Max pooling reads distinct values, so that both backends find the same maximum. cuDNN pads opposite sides
// equally, so every case does.
void AddPooling(Table& t) {
  struct Geometry {
    std::string name;
    std::string type;
    Shape x;
    Window window;
    std::vector<Arg> extra;
  };
  const std::vector<Geometry> geometries{
      {"Kernel2Stride2",
       "MaxPool",
       {2, 3, 8, 8},
       {.kernel_h = 2, .kernel_w = 2, .stride_h = 2, .stride_w = 2},
       {}},
      {"Kernel3Stride2Pad1",
       "MaxPool",
       {2, 16, 9, 9},
       {.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1},
       {}},
      {"Rectangular",
       "MaxPool",
       {1, 2, 7, 6},
       {.kernel_h = 3, .kernel_w = 2, .stride_h = 1, .stride_w = 2},
       {}},
      {"Kernel3Pad1",
       "AveragePool",
       {2, 3, 6, 6},
       {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1},
       {}},
      {"CountIncludePad",
       "AveragePool",
       {2, 3, 7, 7},
       {.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1},
       {Arg("count_include_pad", 1)}},
      {"Kernel2Stride2SixteenChannels",
       "AveragePool",
       {2, 16, 8, 8},
       {.kernel_h = 2, .kernel_w = 2, .stride_h = 2, .stride_w = 2},
       {}},
      {"Global", "MaxPool", {2, 5, 7, 7}, {.kernel_h = 7, .kernel_w = 7}, {Arg("global_pooling", 1)}},
      {"Global", "AveragePool", {2, 5, 7, 7}, {.kernel_h = 7, .kernel_w = 7}, {Arg("global_pooling", 1)}},
  };
  unsigned seed = 300;
  for (const auto& g : geometries) {
    bool global = !g.extra.empty() && g.extra[0].proto.name() == "global_pooling";
    std::vector<Arg> args = With(global ? std::vector<Arg>{} : g.window.Args(), g.extra);
    Shape y = g.window.Output(g.x, g.x[1], g.window.kernel_h, g.window.kernel_w);
    Blobs inputs{{"x", g.type == "MaxPool" ? Distinct(g.x, seed++) : RandomTensor(g.x, seed++)},
                 {"dy", RandomTensor(y, seed++)}};
    t.Add(g.type + "_" + g.name, MakeOperatorDef(g.type, {"x"}, {"y"}, args), inputs,
          g.type == "MaxPool" ? kExact : kReduction);
    OpCase& gradient =
        t.Add(g.type + "Gradient_" + g.name,
              MakeOperatorDef(g.type + "Gradient", {"x", "y", "dy"}, {"dx"}, args), inputs, kReduction);
    gradient.setup = {MakeOperatorDef(g.type, {"x"}, {"y"}, args)};
  }
}

// SpatialBN's inputs for an x of (N, C, ...): positive running variances, scales away from 0.
Blobs BatchNormInputs(const Shape& x, unsigned seed) {
  const int64_t c = x[1];
  return {{"x", RandomTensor(x, seed, -2.f, 3.f)},        {"scale", RandomTensor({c}, seed + 1, 0.5f, 1.5f)},
          {"bias", RandomTensor({c}, seed + 2)},          {"rm", RandomTensor({c}, seed + 3)},
          {"rv", RandomTensor({c}, seed + 4, 0.5f, 2.f)}, {"dy", RandomTensor(x, seed + 5)}};
}

OperatorDef TrainingBatchNorm(const std::vector<Arg>& args = {}, bool relu = false) {
  std::vector<std::string> outputs{"y", "rm", "rv", "saved_mean", "saved_var"};
  if (relu) outputs.push_back("mask");
  return MakeOperatorDef("SpatialBN", {"x", "scale", "bias", "rm", "rv"}, outputs,
                         relu ? With(args, {Arg("relu", 1)}) : args);
}

void AddBatchNorm(Table& t) {
  const std::vector<std::string> statistics{"y", "rm", "rv", "saved_mean", "saved_var"};
  struct Shaped {
    std::string name;
    Shape x;
  };
  const std::vector<Shaped> shapes{{"", {4, 3, 5, 5}}, {"_NC", {8, 6}}, {"_SixteenChannels", {2, 16, 4, 4}}};
  unsigned seed = 400;
  for (const auto& shaped : shapes) {
    Blobs inputs = BatchNormInputs(shaped.x, seed);
    seed += 10;
    // Two steps: the second folds its statistics into running ones the first already moved.
    t.Add("SpatialBN_Training" + shaped.name, TrainingBatchNorm(), inputs, kReduction).runs = 2;
    t.Add("SpatialBN_TestMode" + shaped.name,
          MakeOperatorDef("SpatialBN", {"x", "scale", "bias", "rm", "rv"}, {"y"}, {Arg("is_test", 1)}),
          inputs, kReduction);
    // The ReLU mask's format is each backend's own; Y and the statistics must agree.
    OpCase& fused =
        t.Add("SpatialBN_TrainingRelu" + shaped.name, TrainingBatchNorm({}, true), inputs, kReduction);
    fused.compare = statistics;
    t.Add("SpatialBNGradient_Training" + shaped.name,
          MakeOperatorDef("SpatialBNGradient", {"x", "scale", "dy", "saved_mean", "saved_var"},
                          {"dx", "dscale", "dbias"}),
          inputs, kReduction)
        .setup = {TrainingBatchNorm()};
  }

  const Blobs inputs = BatchNormInputs({4, 3, 5, 5}, 450);
  t.Add("SpatialBN_MomentumAndEpsilon", TrainingBatchNorm({Arg("momentum", 0.5f), Arg("epsilon", 1e-3f)}),
        inputs, kReduction);
  t.Add("SpatialBN_TestModeRelu",
        MakeOperatorDef("SpatialBN", {"x", "scale", "bias", "rm", "rv"}, {"y"},
                        {Arg("is_test", 1), Arg("relu", 1)}),
        inputs, kReduction);
  auto gradient = [&](const std::string& name, const std::vector<std::string>& outputs,
                      const std::vector<Arg>& args, bool relu) {
    std::vector<std::string> in{"x", "scale", "dy", "saved_mean", "saved_var"};
    if (relu) in.push_back("mask");
    t.Add(name, MakeOperatorDef("SpatialBNGradient", in, outputs, args), inputs, kReduction).setup = {
        TrainingBatchNorm({Arg("epsilon", 1e-3f)}, relu)};
  };
  gradient("SpatialBNGradient_OnlyDx", {"dx"}, {Arg("epsilon", 1e-3f), Arg("gradients", Ints{0})}, false);
  gradient("SpatialBNGradient_OnlyDscaleDbias", {"dscale", "dbias"},
           {Arg("epsilon", 1e-3f), Arg("gradients", Ints{1, 2})}, false);
  gradient("SpatialBNGradient_Relu", {"dx", "dscale", "dbias"}, {Arg("epsilon", 1e-3f), Arg("relu", 1)},
           true);
  t.Add("SpatialBNGradient_TestMode",
        MakeOperatorDef("SpatialBNGradient", {"x", "scale", "dy", "rm", "rv"}, {"dx", "dscale", "dbias"},
                        {Arg("is_test", 1)}),
        inputs, kReduction);

  // Statistics combined over two replicas: ChannelStats of each replica's batch, summed, as data parallelism
  // computes them with an Allreduce.
  Blobs combined = inputs;
  combined["x_other"] = RandomTensor({4, 3, 5, 5}, 460, -1.f, 4.f);
  OpCase& c = t.Add("SpatialBN_CombinedStatistics",
                    MakeOperatorDef("SpatialBN", {"x", "scale", "bias", "rm", "rv", "sum", "sum_sq"},
                                    statistics, {Arg("num_batches", 2)}),
                    combined, kReduction);
  c.setup = {MakeOperatorDef("ChannelStats", {"x"}, {"sum_0", "sum_sq_0"}),
             MakeOperatorDef("ChannelStats", {"x_other"}, {"sum_1", "sum_sq_1"}),
             MakeOperatorDef("Sum", {"sum_0", "sum_1"}, {"sum"}),
             MakeOperatorDef("Sum", {"sum_sq_0", "sum_sq_1"}, {"sum_sq"})};

  for (const auto& shaped : shapes) {
    const int64_t channels = shaped.x[1];
    Blobs stats{{"x", RandomTensor(shaped.x, seed, -2.f, 3.f)},
                {"scale", RandomTensor({channels}, seed + 1, 0.5f, 1.5f)},
                {"mean", RandomTensor({channels}, seed + 2)},
                {"var", RandomTensor({channels}, seed + 3, 0.5f, 2.f)},
                {"dy", RandomTensor(shaped.x, seed + 4)},
                {"dscale_all", RandomTensor({channels}, seed + 5, -4.f, 4.f)},
                {"dbias_all", RandomTensor({channels}, seed + 6, -4.f, 4.f)}};
    seed += 10;
    t.Add("ChannelStats" + shaped.name, MakeOperatorDef("ChannelStats", {"x"}, {"sum", "sum_sq"}), stats,
          kReduction);
    t.Add("ChannelBackpropStats" + shaped.name,
          MakeOperatorDef("ChannelBackpropStats", {"x", "mean", "var", "dy"}, {"dscale", "dbias"},
                          {Arg("epsilon", 1e-4f)}),
          stats, kReduction);
    t.Add("SpatialBNCombinedGradient" + shaped.name,
          MakeOperatorDef("SpatialBNCombinedGradient",
                          {"x", "scale", "dy", "mean", "var", "dscale_all", "dbias_all"}, {"dx"},
                          {Arg("num_batches", 2)}),
          stats, kReduction);
  }
}

}  // namespace

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

const std::map<std::string, std::string>& OperatorsWithoutCases() {
  static const std::map<std::string, std::string> excluded{
      {"Allreduce", "needs a communicator over several devices: tests/cuda/nccl_communicator_test.cc"},
      {"Broadcast", "needs a communicator over several devices: tests/cuda/nccl_communicator_test.cc"},
  };
  return excluded;
}

const std::vector<std::string>& TestOnlyOperators() {
  static const std::vector<std::string> types{
      "RecordThread",  // tests/data_parallel_test.cc: records which thread ran each replica
  };
  return types;
}

// Inputs kept away from kinks (Relu at 0, a max pooling's ties) by more than the finite-difference step.
std::vector<GradientCase> GradientCases() {
  std::vector<GradientCase> cases;
  auto add = [&](const std::string& name, const OperatorDef& op, Blobs inputs,
                 GradientCheckOptions options = {}) {
    cases.push_back({name, op, std::move(inputs), options});
  };
  add("Conv", MakeOperatorDef("Conv", {"x", "w", "b"}, {"y"}, {Arg("pad", 1)}),
      {{"x", RandomTensor({2, 3, 5, 5}, 500)},
       {"w", RandomTensor({4, 3, 3, 3}, 501)},
       {"b", RandomTensor({4}, 502)}});
  add("Conv_Stride2Dilation2Groups2",
      MakeOperatorDef("Conv", {"x", "w"}, {"y"},
                      {Arg("stride", 2), Arg("dilation", 2), Arg("pad", 2), Arg("group", 2)}),
      {{"x", RandomTensor({1, 4, 7, 7}, 503)}, {"w", RandomTensor({4, 2, 3, 3}, 504)}});
  add("FC", MakeOperatorDef("FC", {"x", "w", "b"}, {"y"}),
      {{"x", RandomTensor({3, 5}, 510)}, {"w", RandomTensor({4, 5}, 511)}, {"b", RandomTensor({4}, 512)}});

  Tensor relu_x = RandomTensor({2, 3, 4, 5}, 520, 0.1f, 1.f);
  for (int64_t i = 0; i < relu_x.numel(); i += 2) relu_x.data<float>()[i] *= -1;
  add("Relu", MakeOperatorDef("Relu", {"x"}, {"y"}), {{"x", relu_x}});
  add("MaxPool",
      MakeOperatorDef("MaxPool", {"x"}, {"y"}, {Arg("kernel", 3), Arg("stride", 2), Arg("pad", 1)}),
      {{"x", Distinct({1, 2, 7, 7}, 530)}});
  add("AveragePool", MakeOperatorDef("AveragePool", {"x"}, {"y"}, {Arg("kernel", 3), Arg("pad", 1)}),
      {{"x", RandomTensor({1, 2, 5, 5}, 531)}});
  add("AveragePool_Global", MakeOperatorDef("AveragePool", {"x"}, {"y"}, {Arg("global_pooling", 1)}),
      {{"x", RandomTensor({2, 3, 4, 4}, 532)}});

  GradientCheckOptions loss_only;
  loss_only.inputs_to_check = {0};
  loss_only.outputs_with_grad = {1};
  add("SoftmaxWithLoss",
      MakeOperatorDef("SoftmaxWithLoss", {"logits", "labels"}, {"softmax", "loss"}, {Arg("scale", 2.f)}),
      {{"logits", RandomTensor({3, 4}, 540, -2.f, 2.f)}, {"labels", Int32Tensor({3}, {3, 0, 1})}}, loss_only);

  // The running statistics are updated in place, so only X, scale and bias are perturbed.
  GradientCheckOptions batch_norm;
  batch_norm.inputs_to_check = {0, 1, 2};
  batch_norm.step = 1e-3f;
  Blobs bn = BatchNormInputs({2, 3, 2, 2}, 550);
  bn.erase("dy");
  add("SpatialBN_Training", TrainingBatchNorm(), bn, batch_norm);
  add("SpatialBN_TestMode",
      MakeOperatorDef("SpatialBN", {"x", "scale", "bias", "rm", "rv"}, {"y"}, {Arg("is_test", 1)}), bn,
      batch_norm);
  return cases;
}

}  // namespace lockstep::testing
