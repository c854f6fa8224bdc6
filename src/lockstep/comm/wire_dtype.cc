// Narrowing, widening and summing the 16-bit gradient wire.
#include "lockstep/comm/wire_dtype.h"

#include <algorithm>
#include <cmath>

#include "lockstep/core/half.h"

namespace lockstep {

bool IsWireDtype(DataType type) {
  return type == DataType::kFloat || type == DataType::kBFloat16 || type == DataType::kFloat16;
}

void NarrowToWire(const float* values, size_t count, DataType wire_dtype, float scale, void* wire) {
  if (wire_dtype == DataType::kBFloat16) {
    auto* out = static_cast<BFloat16*>(wire);
    for (size_t i = 0; i < count; ++i) out[i] = ToBFloat16(values[i] * scale);
    return;
  }
  LOCKSTEP_ENFORCE(wire_dtype == DataType::kFloat16, "the wire is 16 bits, not {}", DataTypeName(wire_dtype));
  auto* out = static_cast<Float16*>(wire);
  for (size_t i = 0; i < count; ++i) out[i] = ToFloat16(values[i] * scale);
}

void WidenFromWire(const void* wire, size_t count, DataType wire_dtype, float scale, float* values) {
  const float inverse = 1.0f / scale;  // exact: scale is a power of two
  if (wire_dtype == DataType::kBFloat16) {
    const auto* in = static_cast<const BFloat16*>(wire);
    for (size_t i = 0; i < count; ++i) values[i] = ToFloat(in[i]) * inverse;
    return;
  }
  LOCKSTEP_ENFORCE(wire_dtype == DataType::kFloat16, "the wire is 16 bits, not {}", DataTypeName(wire_dtype));
  const auto* in = static_cast<const Float16*>(wire);
  for (size_t i = 0; i < count; ++i) values[i] = ToFloat(in[i]) * inverse;
}

void SumBFloat16(BFloat16* x, const BFloat16* y, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = ToBFloat16(ToFloat(x[i]) + ToFloat(y[i]));
}

void SumFloat16(Float16* x, const Float16* y, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = ToFloat16(ToFloat(x[i]) + ToFloat(y[i]));
}

float MaxAbs(const float* values, size_t count) {
  float largest = 0;
  for (size_t i = 0; i < count; ++i) {
    const float magnitude = std::fabs(values[i]);
    if (std::isnan(magnitude)) return magnitude;
    largest = std::max(largest, magnitude);
  }
  return largest;
}

}  // namespace lockstep
