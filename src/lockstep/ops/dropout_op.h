// What the CPU and CUDA Dropout operators share: their arguments and checks.
#pragma once

#include <cstdint>

#include "lockstep.pb.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

struct DropoutArgs {
  float ratio;   // the probability of dropping an element: below 1 (the schema bounds it to [0, 1])
  bool is_test;  // test mode: the identity, with no mask to write or read

  // Kept elements are scaled up so that test mode needs no scaling.
  float scale() const { return 1.f / (1.f - ratio); }
  // A raw 32-bit draw keeps its element when it is at least this: probability 1 - ratio.
  uint64_t threshold() const { return static_cast<uint64_t>(static_cast<double>(ratio) * 4294967296.0); }
};

// Reads ratio and is_test. In training mode Dropout needs its mask output (Y, mask) and DropoutGradient its
// mask input (dY, mask). Throws InvalidInput naming the operator.
DropoutArgs ParseDropoutArgs(const OperatorDef& def);
// DropoutGradient's mask: uint8 of dY's shape.
void CheckDropoutMask(const OperatorDef& def, const Tensor& mask, const Tensor& dy);

}  // namespace lockstep
