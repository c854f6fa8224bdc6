// LearningRate: lr = base_lr * multiplier(iter) for the fixed, step, multistep and cosine schedules, with an
// optional linear warm-up on top. The result is positive; updates subtract it (MomentumSGDUpdate).
#include <algorithm>
#include <cmath>

#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"

namespace lockstep {
namespace {

enum class Policy { kFixed, kStep, kMultistep, kCosine };

constexpr const char* kPolicies = "fixed, step, multistep, cosine";

class LearningRateOp : public Operator {
 public:
  LearningRateOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws),
        base_lr_(FloatArg("base_lr", 0.0f)),
        gamma_(FloatArg("gamma", 1.0f)),
        stepsize_(IntArg("stepsize", 0)),
        stepsizes_(IntsArg("stepsizes")),
        max_iter_(IntArg("max_iter", 0)),
        warmup_iter_(IntArg("warmup_iter", 0)),
        warmup_start_factor_(FloatArg("warmup_start_factor", 0.1f)) {
    auto fail = [&](const std::string& what) {
      throw InvalidInput(fmt::format("{}: {}", DescribeOperator(def), what));
    };
    if (!HasArgument(def, "base_lr")) fail("argument 'base_lr' is required");
    std::string policy = StringArg("policy", "fixed");
    if (policy == "fixed") {
      policy_ = Policy::kFixed;
    } else if (policy == "step") {
      policy_ = Policy::kStep;
      if (stepsize_ <= 0) fail("policy 'step' needs a positive 'stepsize'");
      if (!HasArgument(def, "gamma")) fail("policy 'step' needs 'gamma'");
    } else if (policy == "multistep") {
      policy_ = Policy::kMultistep;
      if (stepsizes_.empty()) fail("policy 'multistep' needs 'stepsizes'");
      if (!HasArgument(def, "gamma")) fail("policy 'multistep' needs 'gamma'");
      if (!std::is_sorted(stepsizes_.begin(), stepsizes_.end())) fail("'stepsizes' must be ascending");
    } else if (policy == "cosine") {
      policy_ = Policy::kCosine;
      if (max_iter_ <= 0) fail("policy 'cosine' needs a positive 'max_iter'");
    } else {
      fail(fmt::format("unknown policy '{}'; valid policies: {}", policy, kPolicies));
    }
    if (warmup_iter_ < 0) fail("'warmup_iter' must not be negative");
  }

  void Run() override {
    const Tensor& iter = Input(0);  // iter is () or (1,), int64
    if (iter.dtype() != DataType::kInt64 || iter.numel() != 1)
      throw InvalidInput(fmt::format("{}: iter must be one int64, got {} of shape {}", DescribeOperator(def_),
                                     DataTypeName(iter.dtype()), ShapeToString(iter.shape())));
    int64_t step = *iter.data<int64_t>();
    if (step < 0) throw InvalidInput(fmt::format("{}: iter is negative ({})", DescribeOperator(def_), step));
    Tensor* lr = Output(0);  // lr is (), float
    lr->Resize({}, DataType::kFloat);
    *lr->data<float>() = static_cast<float>(base_lr_ * Multiplier(step));
  }

 private:
  double Multiplier(int64_t iter) const {
    double multiplier = 1.0;
    switch (policy_) {
      case Policy::kFixed:
        break;
      case Policy::kStep:
        multiplier = std::pow(gamma_, static_cast<double>(iter / stepsize_));
        break;
      case Policy::kMultistep: {
        auto passed = std::upper_bound(stepsizes_.begin(), stepsizes_.end(), iter) - stepsizes_.begin();
        multiplier = std::pow(gamma_, static_cast<double>(passed));
        break;
      }
      case Policy::kCosine: {
        // Held at the final value past max_iter rather than rising again.
        double progress = static_cast<double>(std::min(iter, max_iter_)) / static_cast<double>(max_iter_);
        multiplier = 0.5 * (1.0 + std::cos(M_PI * progress));
        break;
      }
    }
    // Warm-up (Goyal et al.) ramps linearly from the start factor to 1 so large batches do not diverge early.
    if (iter < warmup_iter_) {
      double fraction = static_cast<double>(iter) / static_cast<double>(warmup_iter_);
      multiplier *= warmup_start_factor_ + (1.0 - warmup_start_factor_) * fraction;
    }
    return multiplier;
  }

  Policy policy_ = Policy::kFixed;
  double base_lr_;
  double gamma_;
  int64_t stepsize_;
  std::vector<int64_t> stepsizes_;
  int64_t max_iter_;
  int64_t warmup_iter_;
  double warmup_start_factor_;
};

std::vector<TensorShape> InferLearningRateShape(const OperatorDef&, const std::vector<TensorShape>&) {
  return {{Shape{}, DataType::kFloat}};
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(LearningRate).NumInputs(1).NumOutputs(1).ShapeFunction(InferLearningRateShape);
LOCKSTEP_REGISTER_CPU_OPERATOR(LearningRate, LearningRateOp);
LOCKSTEP_NO_GRADIENT(LearningRate);

}  // namespace lockstep
