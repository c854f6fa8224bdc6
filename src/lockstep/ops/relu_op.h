// What the Relu family's CPU and CUDA operators share.
#pragma once

#include "lockstep.pb.h"

namespace lockstep {

// LeakyRelu's arg alpha (default 0.01, as Caffe2's); throws InvalidInput naming the operator when negative,
// since the gradient is computed from Y, which only works while Y > 0 exactly where X > 0.
float LeakyReluAlpha(const OperatorDef& def);

}  // namespace lockstep
