// LearningRate: lr = base_lr * multiplier(iter) for Caffe2's fixed, step, multistep, exp, inv and poly
// schedules and a cosine one, with an
// optional linear warm-up on top. The result is positive; updates subtract it (MomentumSGDUpdate).
#include "lockstep/ops/learning_rate_op.h"

#include <algorithm>
#include <cmath>

#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/op_defs.h"

namespace lockstep {

LearningRateArgs ParseLearningRateArgs(const OperatorDef& def) {
  constexpr const char* kPolicies = "fixed, step, multistep, exp, inv, poly, cosine";
  LearningRateArgs args;
  if (!HasArgument(def, "base_lr")) FailOperator(def, "argument 'base_lr' is required");
  args.base_lr = FloatArg(def, "base_lr");
  args.gamma = FloatArg(def, "gamma");
  args.stepsize = IntArg(def, "stepsize");
  args.stepsizes = IntsArg(def, "stepsizes");
  args.power = FloatArg(def, "power");
  args.max_iter = IntArg(def, "max_iter");
  args.warmup_iter = IntArg(def, "warmup_iter");
  args.warmup_start_factor = FloatArg(def, "warmup_start_factor");
  std::string policy = StringArg(def, "policy");
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
  } else if (policy == "exp") {
    args.policy = LearningRatePolicy::kExp;
    if (!HasArgument(def, "gamma")) FailOperator(def, "policy 'exp' needs 'gamma'");
  } else if (policy == "inv") {
    args.policy = LearningRatePolicy::kInv;
    if (!HasArgument(def, "gamma") || !HasArgument(def, "power"))
      FailOperator(def, "policy 'inv' needs 'gamma' and 'power'");
  } else if (policy == "poly") {
    args.policy = LearningRatePolicy::kPoly;
    if (args.max_iter <= 0) FailOperator(def, "policy 'poly' needs a positive 'max_iter'");
    if (!HasArgument(def, "power")) FailOperator(def, "policy 'poly' needs 'power'");
  } else if (policy == "cosine") {
    args.policy = LearningRatePolicy::kCosine;
    if (args.max_iter <= 0) FailOperator(def, "policy 'cosine' needs a positive 'max_iter'");
  } else {
    FailOperator(def, fmt::format("unknown policy '{}'; valid policies: {}", policy, kPolicies));
  }
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
      case LearningRatePolicy::kExp:
        multiplier = std::pow(args_.gamma, static_cast<double>(iter));
        break;
      case LearningRatePolicy::kInv:
        multiplier = std::pow(1.0 + args_.gamma * static_cast<double>(iter), -args_.power);
        break;
      case LearningRatePolicy::kPoly:  // held at 0 past max_iter
        multiplier = std::pow(
            1.0 - static_cast<double>(std::min(iter, args_.max_iter)) / static_cast<double>(args_.max_iter),
            args_.power);
        break;
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

LOCKSTEP_OPERATOR_SCHEMA(LearningRate)
    .SetDoc(
        "lr = base_lr * the policy's multiplier at iteration iter (Caffe2's LearningRate), times a linear "
        "warm-up from warmup_start_factor to 1 over the first warmup_iter iterations.")
    .Input(0, "iter", "one int64: the iteration")
    .Output(0, "lr", "a float scalar")
    .Arg("base_lr", ArgType::kFloat, "required: the rate the policy multiplies")
    .Arg("policy", ArgType::kString, "fixed",
         "fixed; step (gamma^(iter / stepsize)); multistep (gamma^(stepsizes passed)); exp (gamma^iter); inv "
         "((1 + gamma * iter)^-power); poly ((1 - iter / max_iter)^power); cosine (half a cosine from 1 to 0 "
         "over max_iter)")
    .Arg("gamma", ArgType::kFloat, 1.0f, "step, multistep, exp and inv: the factor (they require it)")
    .Arg("power", ArgType::kFloat, 1.0f, "inv and poly: the exponent (they require it)")
    .Arg("stepsize", ArgType::kInt, 0, "step: iterations per step, positive")
    .Min(0)
    .Arg("stepsizes", ArgType::kInts, std::vector<int64_t>{},
         "multistep: the iterations where a step is taken, ascending")
    .Arg("max_iter", ArgType::kInt, 0, "poly and cosine: the iterations the schedule spans, positive")
    .Min(0)
    .Arg("warmup_iter", ArgType::kInt, 0, "iterations of linear warm-up (0: none)")
    .Min(0)
    .Arg("warmup_start_factor", ArgType::kFloat, 0.1f, "the multiplier at iteration 0 of the warm-up")
    .ShapeFunction(InferLearningRateShape);
LOCKSTEP_REGISTER_CPU_OPERATOR(LearningRate, LearningRateOp);
LOCKSTEP_NO_GRADIENT(LearningRate);

OperatorDef LearningRateDef(const std::string& iter, const std::string& lr, const std::vector<Arg>& args) {
  return MakeOperatorDef("LearningRate", {iter}, {lr}, args);
}

}  // namespace lockstep
