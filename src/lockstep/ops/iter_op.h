// Iter's check of its counter, shared by the CPU and CUDA operators.
#pragma once

#include "lockstep.pb.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

// The counter must be one int64. Throws InvalidInput naming the operator.
void CheckIterCounter(const OperatorDef& def, const Tensor& iter);

}  // namespace lockstep
