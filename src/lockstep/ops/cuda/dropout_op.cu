// Dropout and DropoutGradient on CUDA devices, as ops/dropout_op.cc defines them: training zeroes each
// element with probability `ratio`, scales the kept ones by 1 / (1 - ratio) and records a uint8 mask (1 =
// kept); test mode copies. As on the CPU, raw 32-bit draws are compared with ratio * 2^32, but the draws come
// from the device's cuRAND generator, so the masks have the CPU's meaning and statistics, not its values.
#include "lockstep/core/operator.h"
#include "lockstep/cuda/cuda_context.h"
#include "lockstep/ops/cuda/cuda_kernels.cuh"
#include "lockstep/ops/dropout_op.h"

namespace lockstep {
namespace {

// mask = draw >= threshold; y = mask ? x * scale : 0. x, draws, y and mask are (n); y may be x.
template <typename T>
__global__ void DropoutKernel(const T* x, const uint32_t* draws, uint64_t threshold, float scale, int64_t n,
                              T* y, uint8_t* mask) {
  LOCKSTEP_KERNEL_LOOP(i, n) {
    const bool keep = draws[i] >= threshold;
    mask[i] = keep;
    cuda::StoreFloat(y, i, keep ? cuda::LoadFloat(x, i) * scale : 0.0f);
  }
}

// dx = mask ? dy * scale : 0. dy, mask and dx are (n); dx may be dy.
template <typename T>
__global__ void DropoutGradientKernel(const T* dy, const uint8_t* mask, float scale, int64_t n, T* dx) {
  LOCKSTEP_KERNEL_LOOP(i, n) { cuda::StoreFloat(dx, i, mask[i] ? cuda::LoadFloat(dy, i) * scale : 0.0f); }
}

class CudaDropoutOp : public Operator {
 public:
  CudaDropoutOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws), args_(ParseDropoutArgs(def)) {}

  void Run() override {
    const Tensor& x = Input(0);  // x is any shape
    Tensor* y = Output(0);       // y has x's shape and dtype; it may be x itself
    cuda::CudaContext& context = cuda::ContextFor(device().id);
    if (args_.is_test) {
      y->CopyFrom(x);
      // The mask, when asked for, keeps everything so that it agrees with Y.
      if (OutputSize() == 2) {
        Tensor* mask = Output(1);
        mask->Resize(x.shape(), DataType::kUInt8);
        LOCKSTEP_CUDA_CHECK(cudaMemsetAsync(mask->raw_data(), 1, x.numel(), context.stream()));
      }
      return;
    }
    Tensor* mask = Output(1);  // mask has x's shape, uint8: 1 where x is kept
    y->Resize(x.shape(), x.dtype());
    mask->Resize(x.shape(), DataType::kUInt8);
    const int64_t n = x.numel();
    if (n == 0) return;
    auto* draws = static_cast<uint32_t*>(context.Workspace(n * sizeof(uint32_t)));
    LOCKSTEP_CURAND_CHECK(curandGenerate(context.curand(), draws, n));
    const uint64_t threshold = args_.threshold();
    const float scale = args_.scale();
    cuda::DispatchFloating(def_, x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      DropoutKernel<<<cuda::BlocksFor(n), cuda::kThreads, 0, context.stream()>>>(
          static_cast<const T*>(x.raw_data()), draws, threshold, scale, n, static_cast<T*>(y->raw_data()),
          mask->data<uint8_t>());
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    });
  }

 private:
  const DropoutArgs args_;
};

// dX = dY * mask / (1 - ratio) in training; dX = dY in test mode, where the mask is not read.
class CudaDropoutGradientOp : public Operator {
 public:
  CudaDropoutGradientOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), args_(ParseDropoutArgs(def)) {}

  void Run() override {
    const Tensor& dy = Input(0);  // dy is any shape
    Tensor* dx = Output(0);       // dx has dy's shape and dtype; it may be dy itself
    if (args_.is_test) {
      dx->CopyFrom(dy);
      return;
    }
    const Tensor& mask = Input(1);  // mask has dy's shape
    CheckDropoutMask(def_, mask, dy);
    dx->Resize(dy.shape(), dy.dtype());
    const int64_t n = dy.numel();
    if (n == 0) return;
    const float scale = args_.scale();
    cudaStream_t stream = cuda::ContextFor(device().id).stream();
    cuda::DispatchFloating(def_, dy.dtype(), [&](auto zero) {
      using T = decltype(zero);
      DropoutGradientKernel<<<cuda::BlocksFor(n), cuda::kThreads, 0, stream>>>(
          static_cast<const T*>(dy.raw_data()), mask.data<uint8_t>(), scale, n,
          static_cast<T*>(dx->raw_data()));
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    });
  }

 private:
  const DropoutArgs args_;
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(Dropout, CudaDropoutOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(DropoutGradient, CudaDropoutGradientOp);

}  // namespace lockstep
