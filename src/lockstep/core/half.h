// float32 <-> float16 / bfloat16 on the host, rounding to nearest even as the GPU's conversions do, so that
// CPU and CUDA casts agree bit for bit.
#pragma once

#include "lockstep/core/tensor.h"

namespace lockstep {

Float16 ToFloat16(float value);
float ToFloat(Float16 value);
BFloat16 ToBFloat16(float value);
float ToFloat(BFloat16 value);

}  // namespace lockstep
