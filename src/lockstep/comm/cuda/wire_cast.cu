// Kernels of the 16-bit gradient wire; the conversions round to nearest even, as the host's (core/half.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "lockstep/comm/cuda/wire_cast.h"
#include "lockstep/comm/wire_dtype.h"
#include "lockstep/cuda/cuda_check.h"

namespace lockstep {
namespace {

constexpr int kThreads = 256;

unsigned BlocksFor(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>((n + kThreads - 1) / kThreads, 1), 65535));
}

// i runs over [0, n) across the whole grid.
#define WIRE_LOOP(i, n)                                                     \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); \
       i += int64_t{blockDim.x} * gridDim.x)

__device__ void Store(__nv_bfloat16* y, int64_t i, float v) { y[i] = __float2bfloat16_rn(v); }
__device__ void Store(__half* y, int64_t i, float v) { y[i] = __float2half_rn(v); }
__device__ float Load(const __nv_bfloat16* x, int64_t i) { return __bfloat162float(x[i]); }
__device__ float Load(const __half* x, int64_t i) { return __half2float(x[i]); }

// values and wire are (n); scale is one float or nullptr.
template <typename Wire>
__global__ void NarrowKernel(const float* values, const float* scale, Wire* wire, int64_t n) {
  const float s = scale ? *scale : 1.0f;
  WIRE_LOOP(i, n) { Store(wire, i, values[i] * s); }
}

template <typename Wire>
__global__ void WidenKernel(const Wire* wire, const float* scale, float* values, int64_t n) {
  const float inverse = scale ? 1.0f / *scale : 1.0f;  // exact: a power of two
  WIRE_LOOP(i, n) { values[i] = Load(wire, i) * inverse; }
}

// |x| of a float orders as its bits do, as unsigned integers; NaN's bits exceed infinity's.
__global__ void MaxAbsKernel(const float* values, unsigned* max_bits, int64_t n) {
  unsigned largest = 0;
  WIRE_LOOP(i, n) { largest = max(largest, __float_as_uint(values[i]) & 0x7fffffffu); }
  atomicMax(max_bits, largest);
}

__global__ void ScaleKernel(float* value, int summands) { *value = Float16WireScale(*value, summands); }

template <typename Call>
void Dispatch(DataType wire_dtype, const Call& call) {
  if (wire_dtype == DataType::kBFloat16) return call(__nv_bfloat16{});
  LOCKSTEP_ENFORCE(wire_dtype == DataType::kFloat16, "the wire is 16 bits, not {}", DataTypeName(wire_dtype));
  call(__half{});
}

}  // namespace

void NarrowOnDevice(const float* values, size_t n, DataType wire_dtype, const float* scale, void* wire,
                    cudaStream_t stream) {
  Dispatch(wire_dtype, [&](auto type) {
    using Wire = decltype(type);
    const auto count = static_cast<int64_t>(n);
    NarrowKernel<<<BlocksFor(count), kThreads, 0, stream>>>(values, scale, static_cast<Wire*>(wire), count);
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
}

void WidenOnDevice(const void* wire, size_t n, DataType wire_dtype, const float* scale, float* values,
                   cudaStream_t stream) {
  Dispatch(wire_dtype, [&](auto type) {
    using Wire = decltype(type);
    const auto count = static_cast<int64_t>(n);
    WidenKernel<<<BlocksFor(count), kThreads, 0, stream>>>(static_cast<const Wire*>(wire), scale, values,
                                                           count);
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
}

void MaxAbsOnDevice(const float* values, size_t n, float* max_abs, cudaStream_t stream) {
  LOCKSTEP_CUDA_CHECK(cudaMemsetAsync(max_abs, 0, sizeof(float), stream));
  const auto count = static_cast<int64_t>(n);
  MaxAbsKernel<<<BlocksFor(count), kThreads, 0, stream>>>(values, reinterpret_cast<unsigned*>(max_abs),
                                                          count);
  LOCKSTEP_CUDA_CHECK_LAUNCH();
}

void Float16ScaleOnDevice(float* value, int summands, cudaStream_t stream) {
  ScaleKernel<<<1, 1, 0, stream>>>(value, summands);
  LOCKSTEP_CUDA_CHECK_LAUNCH();
}

}  // namespace lockstep
