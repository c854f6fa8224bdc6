// The dtype gradient buckets travel in between processes (--allreduce_dtype): float32, or 16 bits with
// float32 accumulation. A 16-bit allreduce narrows each bucket's float32 values, rounding to nearest even,
// sends the 16-bit values, and at every hop widens both operands to float32, adds, and rounds the sum back
// (SumBFloat16, SumFloat16); the result is widened into the float32 bucket, so the update runs on float32.
//
// Error: a sum of k values that passes through k - 1 such additions carries at most one rounding per input
// and per addition, each at most u = 2^-8 (bfloat16) or 2^-11 (float16) relative to the value rounded, which
// is at most the sum of the |x| so far: |result - exact| <= k * u * sum |x| (wire_dtype_test.cc checks it
// against a float64 reference).
//
// float16 reaches only 65504: before narrowing, every value is multiplied by Float16WireScale(m, k), a power
// of two that the shards agree on (m is the largest |x| over all shards), and the result divided by it.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <string>

#include "lockstep/core/tensor.h"

namespace lockstep {

// float, bfloat16 or float16.
bool IsWireDtype(DataType type);

// values is (count) float32; wire is (count) elements of `wire_dtype` (16 bits): wire = round(values *
// scale).
void NarrowToWire(const float* values, size_t count, DataType wire_dtype, float scale, void* wire);
// values = float32(wire) / scale.
void WidenFromWire(const void* wire, size_t count, DataType wire_dtype, float scale, float* values);

// x[i] = round(float(x[i]) + float(y[i])): a hop of the 16-bit allreduce, x and y are (n).
void SumBFloat16(BFloat16* x, const BFloat16* y, size_t n);
void SumFloat16(Float16* x, const Float16* y, size_t n);

// The largest power of two s such that summands * max_abs * s <= 2^15: every partial sum of `summands`
// values of magnitude at most max_abs, so scaled, stays below float16's 65504 even after rounding, and the
// largest of them keep float16's full precision (values below max_abs * 2^-39 * summands flush to zero).
// 1 when max_abs is 0, infinite or NaN (which then reach the result as they are). Inline for the CUDA
// kernels of the NCCL path too.
#if defined(__CUDACC__)
__host__ __device__
#endif
    inline float
    Float16WireScale(float max_abs, int summands) {
  if (!(max_abs > 0) || !(max_abs <= FLT_MAX) || summands < 1) return 1.0f;
  // 2^15 / (summands * max_abs) = m * 2^e with m in [0.5, 1): its floor power of two is 2^(e - 1). Kept
  // within 2^+-100 so that the scale and its inverse are normal floats.
  int exponent = 0;
  frexp(32768.0 / (static_cast<double>(summands) * max_abs), &exponent);
  exponent = exponent - 1 > 100 ? 100 : (exponent - 1 < -100 ? -100 : exponent - 1);
  return ldexpf(1.0f, exponent);
}

// The largest |values[i]|, for Float16WireScale; NaN when any value is NaN.
float MaxAbs(const float* values, size_t count);

}  // namespace lockstep
