// Bit-level conversions between float32 and the 16-bit float formats.
#include "lockstep/core/half.h"

#include <cstring>

namespace lockstep {
namespace {

uint32_t Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float FromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

}  // namespace

Float16 ToFloat16(float value) {
  const uint32_t bits = Bits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u)  // inf stays inf; NaN stays a (quiet) NaN
    return {static_cast<uint16_t>(sign | (magnitude > 0x7f800000u ? 0x7e00u : 0x7c00u))};
  if (magnitude >= 0x477ff000u) return {static_cast<uint16_t>(sign | 0x7c00u)};  // rounds past 65504: inf
  if (magnitude < 0x38800000u) {
    // Below float16's smallest normal (2^-14): a subnormal multiple of 2^-24. Adding 0.5 (float) puts the
    // rounded multiple in the low mantissa bits, with the hardware's round-to-nearest-even.
    const float shifted = FromBits(magnitude) + 0.5f;
    return {static_cast<uint16_t>(sign | (Bits(shifted) - 0x3f000000u))};
  }
  // Normal: rebias the exponent (127 -> 15) and round the 23-bit mantissa to 10 bits, ties to even; a carry
  // into the exponent is the correct rounding too.
  const uint32_t odd = (magnitude >> 13) & 1u;
  const uint32_t rounded = magnitude + 0xfffu + odd - (112u << 23);
  return {static_cast<uint16_t>(sign | (rounded >> 13))};
}

float ToFloat(Float16 value) {
  const uint32_t sign = static_cast<uint32_t>(value.bits & 0x8000u) << 16;
  const uint32_t exponent = (value.bits >> 10) & 0x1fu;
  const uint32_t mantissa = value.bits & 0x3ffu;
  if (exponent == 0x1fu) return FromBits(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  if (exponent == 0) {  // zero and subnormals: mantissa x 2^-24
    const float magnitude = static_cast<float>(mantissa) * FromBits(0x33800000u);
    return FromBits(sign | Bits(magnitude));
  }
  return FromBits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

}  // namespace lockstep
