// MomentumSGDUpdate's arguments and input checks, shared by the CPU and CUDA operators.
#pragma once

#include "lockstep.pb.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

struct MomentumSGDArgs {
  float momentum;      // arg momentum, default 0
  bool nesterov;       // arg nesterov, default 0
  float weight_decay;  // arg weight_decay (L2), default 0
};

MomentumSGDArgs ParseMomentumSGDArgs(const OperatorDef& def);

// Checks that moment and param are float32 of grad's shape and that lr is one float. Throws InvalidInput
// naming the operator.
void CheckMomentumSGDInputs(const OperatorDef& def, const Tensor& grad, const Tensor& moment,
                            const Tensor& lr, const Tensor& param);

}  // namespace lockstep
