// LearningRate on CUDA devices: the CPU op's schedules (fixed, step, multistep, exp, inv, poly, cosine,
// linear warm-up) evaluated by a one-thread kernel from the iteration counter in device memory, so that no
// step waits for the host to read the counter.
#include <algorithm>
#include <cmath>

#include "lockstep/core/operator.h"
#include "lockstep/cuda/cuda_context.h"
#include "lockstep/ops/learning_rate_op.h"

namespace lockstep {
namespace {

// The schedule's arguments as the kernel reads them; stepsizes is in device memory.
struct Schedule {
  LearningRatePolicy policy;
  double base_lr, gamma, power;
  int64_t stepsize;
  const int64_t* stepsizes;  // (num_stepsizes), ascending
  int64_t num_stepsizes;
  int64_t max_iter, warmup_iter;
  double warmup_start_factor;
};

// iter is one int64, lr one float. The arithmetic is the CPU op's, in double, with the multiply-adds of inv
// and the warm-up kept as two rounded operations as the CPU build computes it; pow and cos are CUDA's (within
// 2 ulp of a double result), so lr, rounded to float, equals the CPU's except when a double result lies
// within an ulp or two of a float rounding boundary. A negative iter, which the CPU op reports, gives a NaN
// learning rate: the device cannot throw, and checking on the host would make every step wait for the
// counter.
__global__ void LearningRateKernel(const int64_t* iter, float* lr, Schedule s) {
  const int64_t step = *iter;
  if (step < 0) {
    *lr = nanf("");
    return;
  }
  double multiplier = 1.0;
  switch (s.policy) {
    case LearningRatePolicy::kFixed:
      break;
    case LearningRatePolicy::kStep:
      multiplier = pow(s.gamma, static_cast<double>(step / s.stepsize));
      break;
    case LearningRatePolicy::kMultistep: {
      int64_t passed = 0;  // std::upper_bound's index: the steps at or before `step`
      while (passed < s.num_stepsizes && s.stepsizes[passed] <= step) ++passed;
      multiplier = pow(s.gamma, static_cast<double>(passed));
      break;
    }
    case LearningRatePolicy::kExp:
      multiplier = pow(s.gamma, static_cast<double>(step));
      break;
    case LearningRatePolicy::kInv:
      multiplier = pow(__dadd_rn(1.0, __dmul_rn(s.gamma, static_cast<double>(step))), -s.power);
      break;
    case LearningRatePolicy::kPoly:
      multiplier =
          pow(1.0 - static_cast<double>(min(step, s.max_iter)) / static_cast<double>(s.max_iter), s.power);
      break;
    case LearningRatePolicy::kCosine: {
      // Held at the final value past max_iter rather than rising again.
      double progress = static_cast<double>(min(step, s.max_iter)) / static_cast<double>(s.max_iter);
      multiplier = 0.5 * (1.0 + cos(M_PI * progress));
      break;
    }
  }
  if (step < s.warmup_iter) {
    double fraction = static_cast<double>(step) / static_cast<double>(s.warmup_iter);
    multiplier *= __dadd_rn(s.warmup_start_factor, __dmul_rn(1.0 - s.warmup_start_factor, fraction));
  }
  *lr = static_cast<float>(s.base_lr * multiplier);
}

class CudaLearningRateOp : public Operator {
 public:
  CudaLearningRateOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws) {
    const LearningRateArgs args = ParseLearningRateArgs(def);
    const int64_t* stepsizes = nullptr;
    int64_t num_stepsizes = 0;
    if (args.policy == LearningRatePolicy::kMultistep) {  // the kernel reads them from device memory
      Tensor host({static_cast<int64_t>(args.stepsizes.size())}, DataType::kInt64);
      std::copy(args.stepsizes.begin(), args.stepsizes.end(), host.data<int64_t>());
      stepsizes_.PlaceOn(device());
      stepsizes_.CopyFrom(host);
      stepsizes = stepsizes_.data<int64_t>();
      num_stepsizes = stepsizes_.numel();
    }
    schedule_ = {args.policy, args.base_lr,  args.gamma,    args.power,       args.stepsize,
                 stepsizes,   num_stepsizes, args.max_iter, args.warmup_iter, args.warmup_start_factor};
  }

  void Run() override {
    const Tensor& iter = Input(0);  // iter is () or (1,), int64
    CheckLearningRateIter(def_, iter);
    Tensor* lr = Output(0);  // lr is (), float
    lr->Resize({}, DataType::kFloat);
    LearningRateKernel<<<1, 1, 0, cuda::ContextFor(device().id).stream()>>>(iter.data<int64_t>(),
                                                                            lr->data<float>(), schedule_);
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  }

 private:
  Schedule schedule_{};
  Tensor stepsizes_;  // the multistep boundaries, on the device
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(LearningRate, CudaLearningRateOp);

}  // namespace lockstep
