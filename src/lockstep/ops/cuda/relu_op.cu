// Relu, LeakyRelu and their gradients on CUDA devices, as ops/relu_op.cc defines them: y = x > 0 ? x : alpha
// * x and dx = y > 0 ? dy : alpha * dy (alpha 0 for Relu), for float32, float16 and bfloat16. All may run in
// place: each element is read before it is written.
#include "lockstep/core/operator.h"
#include "lockstep/cuda/cuda_context.h"
#include "lockstep/ops/cuda/cuda_kernels.cuh"

namespace lockstep {
namespace {

// x and y are (n); y may be x. A NaN passes through, as in oneDNN's ReLU; alpha 0 writes +0.
template <typename T>
__global__ void ReluKernel(const T* x, T* y, int64_t n, float alpha) {
  LOCKSTEP_KERNEL_LOOP(i, n) {
    const float v = cuda::LoadFloat(x, i);
    if (v < 0.0f)
      cuda::StoreFloat(y, i, alpha == 0.0f ? 0.0f : alpha * v);
    else
      y[i] = x[i];
  }
}

// y, dy and dx are (n); dx may be dy.
template <typename T>
__global__ void ReluGradientKernel(const T* y, const T* dy, T* dx, int64_t n, float alpha) {
  LOCKSTEP_KERNEL_LOOP(i, n) {
    const float g = cuda::LoadFloat(dy, i);
    cuda::StoreFloat(dx, i, cuda::LoadFloat(y, i) > 0.0f ? g : (alpha == 0.0f ? 0.0f : alpha * g));
  }
}

template <bool kLeaky>
class CudaReluOp : public Operator {
 public:
  CudaReluOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), alpha_(kLeaky ? FloatArg("alpha") : 0) {}

  void Run() override {
    const Tensor& x = Input(0);  // x is any shape
    Tensor* y = Output(0);       // y has x's shape and dtype
    y->Resize(x.shape(), x.dtype());
    if (x.numel() == 0) return;
    cudaStream_t stream = cuda::ContextFor(device().id).stream();
    cuda::DispatchFloating(def_, x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      ReluKernel<<<cuda::BlocksFor(x.numel()), cuda::kThreads, 0, stream>>>(
          static_cast<const T*>(x.raw_data()), static_cast<T*>(y->raw_data()), x.numel(), alpha_);
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    });
  }

 private:
  const float alpha_;
};

template <bool kLeaky>
class CudaReluGradientOp : public Operator {
 public:
  CudaReluGradientOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), alpha_(kLeaky ? FloatArg("alpha") : 0) {}

  void Run() override {
    const Tensor& y = Input(0);   // y is the forward output
    const Tensor& dy = Input(1);  // dy has y's shape and dtype
    if (y.shape() != dy.shape())
      FailOperator(def_, fmt::format("dY {} must have Y's shape {}", ShapeToString(dy.shape()),
                                     ShapeToString(y.shape())));
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
          static_cast<T*>(dx->raw_data()), y.numel(), alpha_);
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    });
  }

 private:
  const float alpha_;
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(Relu, CudaReluOp<false>);
LOCKSTEP_REGISTER_CUDA_OPERATOR(ReluGradient, CudaReluGradientOp<false>);
LOCKSTEP_REGISTER_CUDA_OPERATOR(LeakyRelu, CudaReluOp<true>);
LOCKSTEP_REGISTER_CUDA_OPERATOR(LeakyReluGradient, CudaReluGradientOp<true>);

}  // namespace lockstep
