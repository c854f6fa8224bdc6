// The 16-bit gradient wire (comm/wire_dtype.h) on a CUDA stream, for NCCL's bfloat16 and float16
// allreduces: narrowing a float32 bucket, widening the result, and float16's scale, kept in device memory so
// that the host never waits for it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "lockstep/core/tensor.h"

namespace lockstep {

// wire (n) = round(values (n) * scale), rounding to nearest even; scale is one float in device memory, or
// nullptr for 1.
void NarrowOnDevice(const float* values, size_t n, DataType wire_dtype, const float* scale, void* wire,
                    cudaStream_t stream);
// values (n) = float32(wire (n)) / scale.
void WidenOnDevice(const void* wire, size_t n, DataType wire_dtype, const float* scale, float* values,
                   cudaStream_t stream);
// *max_abs = the largest |values[i]| of values (n) (NaN when one is NaN).
void MaxAbsOnDevice(const float* values, size_t n, float* max_abs, cudaStream_t stream);
// *value = Float16WireScale(*value, summands): the largest |value| over all ranks in, the scale out.
void Float16ScaleOnDevice(float* value, int summands, cudaStream_t stream);

}  // namespace lockstep
