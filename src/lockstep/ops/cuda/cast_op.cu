// Cast on CUDA devices: float32 <-> float16 / bfloat16 with the hardware's round-to-nearest-even conversions,
// which the CPU op (ops/cast_op.cc) reproduces bit for bit.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "lockstep/core/operator.h"
#include "lockstep/cuda/cuda_context.h"

namespace lockstep {
namespace {

__device__ float LoadFloat(const float* x, int64_t i) { return x[i]; }
__device__ float LoadFloat(const __half* x, int64_t i) { return __half2float(x[i]); }
__device__ float LoadFloat(const __nv_bfloat16* x, int64_t i) { return __bfloat162float(x[i]); }
__device__ void StoreFloat(float* y, int64_t i, float v) { y[i] = v; }
__device__ void StoreFloat(__half* y, int64_t i, float v) { y[i] = __float2half_rn(v); }
__device__ void StoreFloat(__nv_bfloat16* y, int64_t i, float v) { y[i] = __float2bfloat16_rn(v); }

// x and y are n elements.
template <typename From, typename To>
__global__ void CastKernel(const From* x, To* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x)
    StoreFloat(y, i, LoadFloat(x, i));
}

template <typename From, typename To>
void Launch(const void* x, void* y, int64_t n, cudaStream_t stream) {
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 65535);
  CastKernel<<<blocks, threads, 0, stream>>>(static_cast<const From*>(x), static_cast<To*>(y), n);
  LOCKSTEP_CUDA_CHECK_LAUNCH();
}

template <typename From>
void LaunchTo(DataType to, const void* x, void* y, int64_t n, cudaStream_t stream) {
  switch (to) {
    case DataType::kFloat:
      return Launch<From, float>(x, y, n, stream);
    case DataType::kFloat16:
      return Launch<From, __half>(x, y, n, stream);
    default:
      return Launch<From, __nv_bfloat16>(x, y, n, stream);
  }
}

bool Castable(DataType type) {
  return type == DataType::kFloat || type == DataType::kFloat16 || type == DataType::kBFloat16;
}

class CudaCastOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& x = Input(0);  // x is any shape: float32, float16 or bfloat16
    const DataType to = InputSize() == 2 ? Input(1).dtype() : static_cast<DataType>(IntArg("to", 0));
    if (!Castable(x.dtype()) || !Castable(to))
      FailOperator(def_, fmt::format("cannot cast {} to {}; Cast converts float32, float16 and bfloat16",
                                     DataTypeName(x.dtype()), DataTypeName(to)));
    Tensor* y = Output(0);  // y has x's shape, dtype `to`
    if (to == x.dtype()) return y->CopyFrom(x);
    y->Resize(x.shape(), to);
    if (x.numel() == 0) return;
    cudaStream_t stream = cuda::ContextFor(device().id).stream();
    switch (x.dtype()) {
      case DataType::kFloat:
        return LaunchTo<float>(to, x.raw_data(), y->raw_data(), x.numel(), stream);
      case DataType::kFloat16:
        return LaunchTo<__half>(to, x.raw_data(), y->raw_data(), x.numel(), stream);
      default:
        return LaunchTo<__nv_bfloat16>(to, x.raw_data(), y->raw_data(), x.numel(), stream);
    }
  }
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(Cast, CudaCastOp);

}  // namespace lockstep
