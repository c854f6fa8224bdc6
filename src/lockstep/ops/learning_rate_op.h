// LearningRate's schedule arguments and input check, shared by the CPU and CUDA operators so that both
// accept the same schedules and report the same errors.
#pragma once

#include <cstdint>
#include <vector>

#include "lockstep.pb.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

enum class LearningRatePolicy { kFixed, kStep, kMultistep, kExp, kInv, kPoly, kCosine };

// lr = base_lr * multiplier(iter) under `policy`, times a linear warm-up from warmup_start_factor to 1 over
// the first warmup_iter iterations.
struct LearningRateArgs {
  LearningRatePolicy policy = LearningRatePolicy::kFixed;
  double base_lr;
  double gamma;
  int64_t stepsize;                // policy step
  std::vector<int64_t> stepsizes;  // policy multistep: ascending
  double power;                    // policies inv and poly
  int64_t max_iter;                // policies poly and cosine
  int64_t warmup_iter;
  double warmup_start_factor;
};

// Reads the arguments with their defaults and checks that the policy has what it needs. Throws InvalidInput
// naming the operator.
LearningRateArgs ParseLearningRateArgs(const OperatorDef& def);

// The iteration counter must be one int64.
void CheckLearningRateIter(const OperatorDef& def, const Tensor& iter);

}  // namespace lockstep
