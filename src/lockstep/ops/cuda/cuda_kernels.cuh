// What the hand-written CUDA kernels of ops/cuda share: the launch shape of a grid-stride loop, the mapping
// of lockstep's 16-bit storage types to CUDA's, and a dispatch over the floating dtypes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "lockstep/core/net_def.h"
#include "lockstep/core/tensor.h"

namespace lockstep::cuda {

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements (at least one, so that a launch is always valid).
inline unsigned BlocksFor(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 65535));
}

}  // namespace lockstep::cuda

// i runs over [0, n) across the whole grid.
#define LOCKSTEP_KERNEL_LOOP(i, n)                                          \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); \
       i += int64_t{blockDim.x} * gridDim.x)

namespace lockstep::cuda {

// Kernels compute in float32 and round once when they store a 16-bit value.
__device__ inline float LoadFloat(const float* x, int64_t i) { return x[i]; }
__device__ inline float LoadFloat(const __half* x, int64_t i) { return __half2float(x[i]); }
__device__ inline float LoadFloat(const __nv_bfloat16* x, int64_t i) { return __bfloat162float(x[i]); }
__device__ inline void StoreFloat(float* y, int64_t i, float v) { y[i] = v; }
__device__ inline void StoreFloat(__half* y, int64_t i, float v) { y[i] = __float2half_rn(v); }
__device__ inline void StoreFloat(__nv_bfloat16* y, int64_t i, float v) { y[i] = __float2bfloat16_rn(v); }

// Calls f(T{}) with T the CUDA storage type of `type` (float, __half or __nv_bfloat16); any other dtype is
// an InvalidInput naming the operator.
template <typename F>
void DispatchFloating(const OperatorDef& def, DataType type, F&& f) {
  switch (type) {
    case DataType::kFloat:
      return f(float{});
    case DataType::kFloat16:
      return f(__half{});
    case DataType::kBFloat16:
      return f(__nv_bfloat16{});
    default:
      FailOperator(def, fmt::format("{} tensors are not supported on CUDA; use float32, float16 or bfloat16",
                                    DataTypeName(type)));
  }
}

// For an operator that updates a blob in place (EnforceInplace): `staged` is what Input() returned, which is
// a copy when the blob lived in other memory, and `output` is the same blob after Output() moved it here
// (losing its old buffer). The state is carried over so the update continues from it.
inline Tensor* InPlaceState(const Tensor& staged, Tensor* output) {
  if (&staged != output) output->CopyFrom(staged);
  return output;
}

}  // namespace lockstep::cuda
