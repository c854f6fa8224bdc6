// What the CPU and CUDA Dropout operators share: their arguments and checks.
#pragma once

#include "lockstep.pb.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

// Arg ratio, the probability of dropping a unit: below 1 (the schema bounds it to [0, 1]). Throws
// InvalidInput.
float CheckedDropoutRatio(const OperatorDef& def);
// Arg is_test. In training mode Dropout needs its mask output (Y, mask) and DropoutGradient its mask input
// (dY, mask); throws InvalidInput naming the operator otherwise.
bool DropoutIsTest(const OperatorDef& def);
// DropoutGradient's mask: uint8 of dY's shape.
void CheckDropoutMask(const OperatorDef& def, const Tensor& mask, const Tensor& dy);

}  // namespace lockstep
