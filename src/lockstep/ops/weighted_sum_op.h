// WeightedSum's input checks, shared by the CPU and CUDA operators.
#pragma once

#include "lockstep.pb.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

// The inputs must be pairs (X0, w0, X1, w1, ...). Throws InvalidInput naming the operator.
void CheckWeightedSumArity(const OperatorDef& def);

// The pair (x, w) of inputs i and i + 1: x must be float32 of x0's shape and w one float.
void CheckWeightedSumPair(const OperatorDef& def, int i, const Tensor& x, const Tensor& w, const Tensor& x0);

}  // namespace lockstep
