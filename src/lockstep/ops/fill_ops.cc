// Fill operators that initialise a blob: ConstantFill, GivenTensorFill, GaussianFill, UniformFill, XavierFill
// and MSRAFill.
// The output takes the shape of the optional input, else the `shape` argument; random fills are seeded.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <random>

#include "lockstep/core/gradient.h"
#include "lockstep/core/net_def.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/op_defs.h"

namespace lockstep {
namespace {

DataType FillDataType(const OperatorDef& def) {
  int64_t code = IntArg(def, "dtype");
  auto type = static_cast<DataType>(code);
  if (type != DataType::kFloat && type != DataType::kInt32 && type != DataType::kInt64)
    FailOperator(def, fmt::format("dtype {} is not supported (use 1 float, 2 int32 or 10 int64)", code));
  return type;
}

// The one place the output shape of a fill is decided, shared by Run() and shape inference.
Shape FillShape(const OperatorDef& def, const Shape* input_shape) {
  if (input_shape) return *input_shape;
  return IntsArg(def, "shape");
}

std::vector<TensorShape> InferFillShape(const OperatorDef& def, const std::vector<TensorShape>& in) {
  return {{FillShape(def, in.empty() ? nullptr : &in[0].dims), FillDataType(def)}};
}

// Base of all fills: sizes the output, then lets the subclass write its values.
class FillOp : public Operator {
 public:
  FillOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), dtype_(FillDataType(def)), run_once_(IntArg("run_once") != 0) {}

  void Run() override {
    if (run_once_ && filled_) return;
    Tensor* out = Output(0);
    out->Resize(FillShape(def_, InputSize() > 0 ? &Input(0).shape() : nullptr), dtype_);
    Fill(out);
    filled_ = true;
  }

 protected:
  virtual void Fill(Tensor* out) = 0;
  DataType dtype_;

 private:
  bool run_once_;
  bool filled_ = false;
};

class ConstantFillOp : public FillOp {
 public:
  ConstantFillOp(const OperatorDef& def, Workspace* ws) : FillOp(def, ws) {
    // Integer fills keep an integer argument exact instead of passing it through float.
    const Argument* value = FindArgument(def, "value");
    int_value_ = value && value->has_i() ? value->i() : static_cast<int64_t>(FloatArg("value"));
    float_value_ = FloatArg("value");
  }

 protected:
  void Fill(Tensor* out) override {
    switch (dtype_) {
      case DataType::kFloat:
        std::fill_n(out->data<float>(), out->numel(), float_value_);
        break;
      case DataType::kInt32:
        std::fill_n(out->data<int32_t>(), out->numel(), static_cast<int32_t>(int_value_));
        break;
      case DataType::kInt64:
        std::fill_n(out->data<int64_t>(), out->numel(), int_value_);
        break;
      default:
        LOCKSTEP_ENFORCE(false, "unreachable dtype {}", DataTypeName(dtype_));
    }
  }

 private:
  float float_value_;
  int64_t int_value_;
};

// Caffe2's GivenTensorFill: the values given, in row-major order.
class GivenTensorFillOp : public FillOp {
 public:
  GivenTensorFillOp(const OperatorDef& def, Workspace* ws) : FillOp(def, ws) {
    if (dtype_ != DataType::kFloat) FailOperator(def, "GivenTensorFill gives float (dtype 1) values only");
    const Argument* values = FindArgument(def, "values");
    if (values) values_.assign(values->floats().begin(), values->floats().end());
  }

 protected:
  void Fill(Tensor* out) override {
    if (static_cast<int64_t>(values_.size()) != out->numel())
      FailOperator(def_, fmt::format("{} values for a shape of {} elements", values_.size(), out->numel()));
    std::copy(values_.begin(), values_.end(), out->data<float>());
  }

 private:
  std::vector<float> values_;
};

// A fill given no seed (neither a random_seed in its device option nor a seed argument) takes the next of a
// process-wide sequence, as Caffe2's did: two such fills, or one run twice by RunOperatorOnce, draw different
// values, and a program that creates them in the same order draws the same ones every time it runs.
uint64_t NextUnseededSeed() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

// Random fills draw from one generator per operator, seeded once, so a re-run continues the sequence and
// two operators with the same seed produce the same values.
class RandomFillOp : public FillOp {
 public:
  RandomFillOp(const OperatorDef& def, Workspace* ws) : FillOp(def, ws) {
    if (dtype_ != DataType::kFloat) FailOperator(def, "random fills produce float (dtype 1) only");
    const uint64_t seed = def.device_option().has_random_seed() ? def.device_option().random_seed()
                          : HasArgument(def, "seed")            ? IntArg("seed")
                                                                : NextUnseededSeed();
    rng_.seed(static_cast<std::mt19937::result_type>(seed));
  }

 protected:
  template <class Distribution>
  void Draw(Tensor* out, Distribution distribution) {
    float* data = out->data<float>();
    for (int64_t i = 0; i < out->numel(); ++i) data[i] = distribution(rng_);
  }

  // Fan-based fills read their fan from the leading dims.
  void RequireRank(const Tensor& out, int rank) const {
    if (out.ndim() < rank)
      FailOperator(def_, fmt::format("{} needs a shape with at least {} dims, got {}", def_.type(), rank,
                                     ShapeToString(out.shape())));
  }

  std::mt19937 rng_;
};

class GaussianFillOp : public RandomFillOp {
 public:
  GaussianFillOp(const OperatorDef& def, Workspace* ws)
      : RandomFillOp(def, ws), mean_(FloatArg("mean")), std_(FloatArg("std")) {
    if (!(std_ > 0.0f)) FailOperator(def, "std must be positive");
  }

 protected:
  void Fill(Tensor* out) override { Draw(out, std::normal_distribution<float>(mean_, std_)); }

 private:
  float mean_, std_;
};

class UniformFillOp : public RandomFillOp {
 public:
  UniformFillOp(const OperatorDef& def, Workspace* ws)
      : RandomFillOp(def, ws), min_(FloatArg("min")), max_(FloatArg("max")) {
    if (!(min_ < max_)) FailOperator(def, fmt::format("min ({}) must be below max ({})", min_, max_));
  }

 protected:
  // Values in [min, max).
  void Fill(Tensor* out) override { Draw(out, std::uniform_real_distribution<float>(min_, max_)); }

 private:
  float min_, max_;
};

// Xavier (Glorot) as Caffe2 defines it: uniform in +-sqrt(3 / fan_in), fan_in = numel / shape[0], which keeps
// the variance of a layer's output equal to that of its input.
class XavierFillOp : public RandomFillOp {
 public:
  using RandomFillOp::RandomFillOp;

 protected:
  void Fill(Tensor* out) override {
    // out is (fan_out, ...): weights of Conv (M, C, kH, kW) or FC (N, K)
    if (out->numel() == 0) return;
    RequireRank(*out, 1);
    float scale = std::sqrt(3.0f / static_cast<float>(out->numel() / out->dim(0)));
    Draw(out, std::uniform_real_distribution<float>(-scale, scale));
  }
};

// MSRA (He) as Caffe2 defines it: Gaussian with std sqrt(2 / fan_out), fan_out = numel / shape[1].
class MSRAFillOp : public RandomFillOp {
 public:
  using RandomFillOp::RandomFillOp;

 protected:
  void Fill(Tensor* out) override {
    // out is (M, C, ...): fan_out = M * kH * kW for a Conv weight
    if (out->numel() == 0) return;
    RequireRank(*out, 2);
    float stddev = std::sqrt(2.0f / static_cast<float>(out->numel() / out->dim(1)));
    Draw(out, std::normal_distribution<float>(0.0f, stddev));
  }
};

// What every fill declares: the optional input whose shape Y takes, or the shape and dtype arguments.
void DeclareFill(OpSchema& schema) {
  schema.OptionalInput(0, "like", "Y takes its shape")
      .Output(0, "Y", "shape from input 0, else from arg shape")
      .Arg("shape", ArgType::kInts, std::vector<int64_t>{}, "Y's shape without input 0 ([]: a scalar)")
      .Min(0)
      .Arg("dtype", ArgType::kInt, static_cast<int>(DataType::kFloat),
           "Y's TensorProto.DataType: 1 float, 2 int32, 10 int64 (random fills: float only)")
      .Arg("run_once", ArgType::kInt, 0, "1: fill at the op's first run only, later runs leave Y as it is")
      .Range(0, 1)
      .ShapeFunction(InferFillShape);
}

// Random fills also take a seed, for when the device option carries none.
void DeclareRandomFill(OpSchema& schema) {
  DeclareFill(schema);
  schema
      .Arg("seed", ArgType::kInt, 0,
           "seeds the generator when the device option has no random_seed; without either, the next of a "
           "process-wide sequence")
      .Min(0);
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(ConstantFill)
    .SetDoc("Y = value everywhere; also the seed of each loss's gradient.")
    .Include(DeclareFill)
    .Arg("value", ArgType::kFloat, 0.0f, "the value; an int stays exact in int fills")
    .Role(OpRole::kGradientSeed);
LOCKSTEP_OPERATOR_SCHEMA(GivenTensorFill)
    .SetDoc("Y = the values given, in row-major order (Caffe2's GivenTensorFill).")
    .Include(DeclareFill)
    .Arg("values", ArgType::kFloats, "required: as many values as Y's shape holds");
LOCKSTEP_OPERATOR_SCHEMA(GaussianFill)
    .SetDoc("Y drawn from a normal distribution N(mean, std^2).")
    .Include(DeclareRandomFill)
    .Arg("mean", ArgType::kFloat, 0.0f, "the distribution's mean")
    .Arg("std", ArgType::kFloat, 1.0f, "the standard deviation, positive")
    .Min(0);
LOCKSTEP_OPERATOR_SCHEMA(UniformFill)
    .SetDoc("Y drawn uniformly from [min, max).")
    .Include(DeclareRandomFill)
    .Arg("min", ArgType::kFloat, 0.0f, "the lower bound, below max")
    .Arg("max", ArgType::kFloat, 1.0f, "the upper bound (excluded)");
LOCKSTEP_OPERATOR_SCHEMA(XavierFill)
    .SetDoc("Y uniform in +-sqrt(3 / fan_in), fan_in = size / shape[0] (Caffe2's Xavier).")
    .Include(DeclareRandomFill);
LOCKSTEP_OPERATOR_SCHEMA(MSRAFill)
    .SetDoc("Y normal with std sqrt(2 / fan_out), fan_out = size / shape[1] (Caffe2's MSRA).")
    .Include(DeclareRandomFill);
LOCKSTEP_REGISTER_CPU_OPERATOR(ConstantFill, ConstantFillOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(GivenTensorFill, GivenTensorFillOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(GaussianFill, GaussianFillOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(UniformFill, UniformFillOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(XavierFill, XavierFillOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(MSRAFill, MSRAFillOp);
LOCKSTEP_NO_GRADIENT(ConstantFill);
LOCKSTEP_NO_GRADIENT(GivenTensorFill);
LOCKSTEP_NO_GRADIENT(GaussianFill);
LOCKSTEP_NO_GRADIENT(UniformFill);
LOCKSTEP_NO_GRADIENT(XavierFill);
LOCKSTEP_NO_GRADIENT(MSRAFill);

OperatorDef ConstantFillDef(const std::string& output, const Shape& shape, float value, DataType dtype) {
  std::vector<Arg> args{Arg("shape", shape), Arg("value", value)};
  if (dtype != DataType::kFloat) args.emplace_back("dtype", static_cast<int>(dtype));
  return MakeOperatorDef("ConstantFill", {}, {output}, args);
}

}  // namespace lockstep
