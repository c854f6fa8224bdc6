// float32 <-> float16 / bfloat16 on the host, rounding to nearest even as the GPU's conversions do, so that
// CPU and CUDA casts agree bit for bit.
#pragma once

#include <cstring>

#include "lockstep/core/tensor.h"

namespace lockstep {

Float16 ToFloat16(float value);
float ToFloat(Float16 value);

// Inline: the 16-bit gradient wire (comm/wire_dtype.h) converts and sums whole buckets with them.
inline BFloat16 ToBFloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return {static_cast<uint16_t>((bits >> 16) | 0x40u)};  // quiet NaN
  const uint32_t odd = (bits >> 16) & 1u;  // ties to even
  return {static_cast<uint16_t>((bits + 0x7fffu + odd) >> 16)};
}

inline float ToFloat(BFloat16 value) {
  const uint32_t bits = static_cast<uint32_t>(value.bits) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof result);
  return result;
}

}  // namespace lockstep
