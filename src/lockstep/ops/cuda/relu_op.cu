// Relu and ReluGradient on CUDA devices, as ops/relu_op.cc defines them: y = max(x, 0) and dx = dy * (y > 0),
// for float32, float16 and bfloat16. Both may run in place: each element is read before it is written.
#include "lockstep/core/operator.h"
#include "lockstep/cuda/cuda_context.h"
#include "lockstep/ops/cuda/cuda_kernels.cuh"

namespace lockstep {
namespace {

// x and y are (n); y may be x. A NaN passes through, as in oneDNN's ReLU.
template <typename T>
__global__ void ReluKernel(const T* x, T* y, int64_t n) {
  LOCKSTEP_KERNEL_LOOP(i, n) { y[i] = cuda::LoadFloat(x, i) < 0.0f ? T(0.0f) : x[i]; }
}

// y, dy and dx are (n); dx may be dy.
template <typename T>
__global__ void ReluGradientKernel(const T* y, const T* dy, T* dx, int64_t n) {
  LOCKSTEP_KERNEL_LOOP(i, n) {
    cuda::StoreFloat(dx, i, cuda::LoadFloat(y, i) > 0.0f ? cuda::LoadFloat(dy, i) : 0.0f);
  }
}

class CudaReluOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& x = Input(0);  // x is any shape
    Tensor* y = Output(0);       // y has x's shape and dtype
    y->Resize(x.shape(), x.dtype());
    if (x.numel() == 0) return;
    cudaStream_t stream = cuda::ContextFor(device().id).stream();
    cuda::DispatchFloating(def_, x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      ReluKernel<<<cuda::BlocksFor(x.numel()), cuda::kThreads, 0, stream>>>(
          static_cast<const T*>(x.raw_data()), static_cast<T*>(y->raw_data()), x.numel());
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    });
  }
};

class CudaReluGradientOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& y = Input(0);   // y is the forward output
    const Tensor& dy = Input(1);  // dy has y's shape and dtype
    LOCKSTEP_ENFORCE(y.shape() == dy.shape(), "ReluGradient: y {} vs dy {}", ShapeToString(y.shape()),
                     ShapeToString(dy.shape()));
    if (dy.dtype() != y.dtype())
      FailOperator(def_, fmt::format("dY is {} but Y is {}; they must have one dtype",
                                     DataTypeName(dy.dtype()), DataTypeName(y.dtype())));
    Tensor* dx = Output(0);  // dx has y's shape and dtype
    dx->Resize(y.shape(), y.dtype());
    if (y.numel() == 0) return;
    cudaStream_t stream = cuda::ContextFor(device().id).stream();
    cuda::DispatchFloating(def_, y.dtype(), [&](auto zero) {
      using T = decltype(zero);
      ReluGradientKernel<<<cuda::BlocksFor(y.numel()), cuda::kThreads, 0, stream>>>(
          static_cast<const T*>(y.raw_data()), static_cast<const T*>(dy.raw_data()),
          static_cast<T*>(dx->raw_data()), y.numel());
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    });
  }
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(Relu, CudaReluOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(ReluGradient, CudaReluGradientOp);

}  // namespace lockstep
