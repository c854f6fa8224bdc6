// ReluGradient's arithmetic for the CPU operators that fold it into another op's gradient (SumReluGradient,
// AveragePoolReluGradient): dx = g where y > 0, else g * 0, which keeps g's sign and NaNs as oneDNN's
// ReluGradient does, so that a fused op gives the bits of the pair it replaces. Float32 and bfloat16 values
// are widened to float32 and rounded once.
#pragma once

#include <cstdint>
#include <cstring>

#include "lockstep/core/half.h"

namespace lockstep {

inline float Widen(float value) { return value; }
inline float Widen(BFloat16 value) { return ToFloat(value); }
template <typename T>
T Narrow(float value);
template <>
inline float Narrow<float>(float value) {
  return value;
}
template <>
inline BFloat16 Narrow<BFloat16>(float value) {
  return ToBFloat16(value);
}

// Selected with integer masks: 0 < y <= inf is one range of unsigned integers. Compared as integers, loops
// vectorize; a float comparison may trap, which keeps the compiler from vectorizing them.
inline float WherePositive(float y, float g) {
  uint32_t y_bits, kept_bits, dropped_bits;
  const float dropped = g * 0.f;
  std::memcpy(&y_bits, &y, sizeof y_bits);
  std::memcpy(&kept_bits, &g, sizeof kept_bits);
  std::memcpy(&dropped_bits, &dropped, sizeof dropped_bits);
  const uint32_t mask = y_bits - 1u < 0x7f800000u ? ~0u : 0u;
  const uint32_t bits = (kept_bits & mask) | (dropped_bits & ~mask);
  float result;
  std::memcpy(&result, &bits, sizeof result);
  return result;
}

}  // namespace lockstep
