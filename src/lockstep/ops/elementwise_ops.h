// The shape checks of Add, Sum and SumReduceLike, shared by the CPU and CUDA operators.
#pragma once

#include "lockstep.pb.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

// A is (outer, inner) and B is (inner) once flattened, where B's shape is A's shape or, with broadcast=1, a
// suffix of it. Returns the output shape (A's). Throws InvalidInput naming the operator.
Shape AddShape(const OperatorDef& def, const Shape& a, const Shape& b);

// C may overwrite B (`c_is_b`) only when A and B have the same shape.
void CheckAddInPlace(const OperatorDef& def, bool c_is_b, const Shape& a, const Shape& b);

// Sum's input i must have input 0's shape, `first`.
void CheckSumInput(const OperatorDef& def, int i, const Shape& shape, const Shape& first);

// SumReduceLike's B must match the last dims of dY.
void CheckSumReduceLikeShapes(const OperatorDef& def, const Shape& dy, const Shape& b);

}  // namespace lockstep
