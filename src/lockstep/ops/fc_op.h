// FC's shapes on every device: X flattened to a matrix (N, K) at arg `axis`, W (M, K), b (M), and the checks
// of the inputs against them.
#pragma once

#include <cstdint>

#include "lockstep.pb.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

// X's flattening as a matrix (N, K) and Y's shape x[:axis] + (M).
struct FcShapes {
  int64_t n, k, m;
  Shape y;
};

// Checks that W is (M, K) and that b (when given) is (M). Throws InvalidInput naming the operator.
FcShapes FcOutputShape(const OperatorDef& def, const Shape& x, const Shape& w, const Shape* b);

// FCGradient's shapes: FcOutputShape without a bias, and a check that dY has the forward output's shape.
FcShapes FcGradientShapes(const OperatorDef& def, const Shape& x, const Shape& w, const Shape& dy);

}  // namespace lockstep
