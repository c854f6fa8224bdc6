// What the CPU and CUDA reshapes share: ResizeLike's check and the copy under a new shape.
#pragma once

#include "lockstep.pb.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

// ResizeLike(A, B) -> C copies A into B's shape: A must have as many elements as B. Throws InvalidInput
// naming the operator.
void CheckResizeLike(const OperatorDef& def, const Tensor& a, const Tensor& b);

// Copies x (any memory) into y under `shape` (same element count); in place only the shape changes.
void CopyWithShape(const Tensor& x, const Shape& shape, Tensor* y);

}  // namespace lockstep
