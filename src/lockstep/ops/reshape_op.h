// The shape check of ResizeLike, shared by the CPU and CUDA operators.
#pragma once

#include "lockstep.pb.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

// ResizeLike(A, B) -> C copies A into B's shape: A must have as many elements as B. Throws InvalidInput
// naming the operator.
void CheckResizeLike(const OperatorDef& def, const Tensor& a, const Tensor& b);

}  // namespace lockstep
