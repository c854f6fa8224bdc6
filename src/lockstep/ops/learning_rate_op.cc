// LearningRate: lr = base_lr * multiplier(iter) for the fixed, step, multistep and cosine schedules, with an
// optional linear warm-up on top. The result is positive; updates subtract it (MomentumSGDUpdate).
#include "lockstep/ops/learning_rate_op.h"

#include <algorithm>
#include <cmath>

#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/op_defs.h"

namespace lockstep {

LearningRateArgs ParseLearningRateArgs(const OperatorDef& def) {
  constexpr const char* kPolicies = "fixed, step, multistep, cosine";
  LearningRateArgs args;
  args.base_lr = GetFloatArgument(def, "base_lr", 0.0f);
  args.gamma = GetFloatArgument(def, "gamma", 1.0f);
  args.stepsize = GetIntArgument(def, "stepsize", 0);
  args.stepsizes = GetIntsArgument(def, "stepsizes");
  args.max_iter = GetIntArgument(def, "max_iter", 0);
  args.warmup_iter = GetIntArgument(def, "warmup_iter", 0);
  args.warmup_start_factor = GetFloatArgument(def, "warmup_start_factor", 0.1f);
  if (!HasArgument(def, "base_lr")) FailOperator(def, "argument 'base_lr' is required");
  std::string policy = GetStringArgument(def, "policy", "fixed");
  if (policy == "fixed") {
    args.policy = LearningRatePolicy::kFixed;
  } else if (policy == "step") {
    args.policy = LearningRatePolicy::kStep;
    if (args.stepsize <= 0) FailOperator(def, "policy 'step' needs a positive 'stepsize'");
    if (!HasArgument(def, "gamma")) FailOperator(def, "policy 'step' needs 'gamma'");
  } else if (policy == "multistep") {
    args.policy = LearningRatePolicy::kMultistep;
    if (args.stepsizes.empty()) FailOperator(def, "policy 'multistep' needs 'stepsizes'");
    if (!HasArgument(def, "gamma")) FailOperator(def, "policy 'multistep' needs 'gamma'");
    if (!std::is_sorted(args.stepsizes.begin(), args.stepsizes.end()))
      FailOperator(def, "'stepsizes' must be ascending");
  } else if (policy == "cosine") {
    args.policy = LearningRatePolicy::kCosine;
    if (args.max_iter <= 0) FailOperator(def, "policy 'cosine' needs a positive 'max_iter'");
  } else {
    FailOperator(def, fmt::format("unknown policy '{}'; valid policies: {}", policy, kPolicies));
  }
  if (args.warmup_iter < 0) FailOperator(def, "'warmup_iter' must not be negative");
  return args;
}

void CheckLearningRateIter(const OperatorDef& def, const Tensor& iter) {
  CheckOneValue(def, iter, DataType::kInt64, "iter must be one int64");
}

namespace {

// lr = base_lr x the policy's multiplier at step iter (Caffe2's LearningRate), a float scalar.
class LearningRateOp : public Operator {
 public:
  LearningRateOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), args_(ParseLearningRateArgs(def)) {}

  void Run() override {
    const Tensor& iter = Input(0);  // iter is () or (1,), int64
    CheckLearningRateIter(def_, iter);
    int64_t step = *iter.data<int64_t>();
    if (step < 0) FailOperator(def_, fmt::format("iter is negative ({})", step));
    Tensor* lr = Output(0);  // lr is (), float
    lr->Resize({}, DataType::kFloat);
    *lr->data<float>() = static_cast<float>(args_.base_lr * Multiplier(step));
  }

 private:
  double Multiplier(int64_t iter) const {
    double multiplier = 1.0;
    switch (args_.policy) {
      case LearningRatePolicy::kFixed:
        break;
      case LearningRatePolicy::kStep:
        multiplier = std::pow(args_.gamma, static_cast<double>(iter / args_.stepsize));
        break;
      case LearningRatePolicy::kMultistep: {
        auto passed =
            std::upper_bound(args_.stepsizes.begin(), args_.stepsizes.end(), iter) - args_.stepsizes.begin();
        multiplier = std::pow(args_.gamma, static_cast<double>(passed));
        break;
      }
      case LearningRatePolicy::kCosine: {
        // Held at the final value past max_iter rather than rising again.
        double progress =
            static_cast<double>(std::min(iter, args_.max_iter)) / static_cast<double>(args_.max_iter);
        multiplier = 0.5 * (1.0 + std::cos(M_PI * progress));
        break;
      }
    }
    // Warm-up (Goyal et al.) ramps linearly from the start factor to 1 so large batches do not diverge early.
    if (iter < args_.warmup_iter) {
      double fraction = static_cast<double>(iter) / static_cast<double>(args_.warmup_iter);
      multiplier *= args_.warmup_start_factor + (1.0 - args_.warmup_start_factor) * fraction;
    }
    return multiplier;
  }

  const LearningRateArgs args_;
};

std::vector<TensorShape> InferLearningRateShape(const OperatorDef&, const std::vector<TensorShape>&) {
  return {{Shape{}, DataType::kFloat}};
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(LearningRate).NumInputs(1).NumOutputs(1).ShapeFunction(InferLearningRateShape);
LOCKSTEP_REGISTER_CPU_OPERATOR(LearningRate, LearningRateOp);
LOCKSTEP_NO_GRADIENT(LearningRate);

OperatorDef LearningRateDef(const std::string& iter, const std::string& lr, const std::vector<Arg>& args) {
  return MakeOperatorDef("LearningRate", {iter}, {lr}, args);
}

}  // namespace lockstep
