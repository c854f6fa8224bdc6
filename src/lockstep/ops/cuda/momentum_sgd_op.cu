// MomentumSGDUpdate on CUDA devices: the CPU op's step (plain or Nesterov momentum, L2 weight decay) in one
// pass, float32, with the learning rate read on the device so the update never waits for the host.
#include "lockstep/core/operator.h"
#include "lockstep/cuda/cuda_context.h"
#include "lockstep/ops/cuda/cuda_kernels.cuh"
#include "lockstep/ops/momentum_sgd_op.h"

namespace lockstep {
namespace {

// grad, grad_out, moment and param are (n); lr is a single float. grad_out may be grad: each element is read
// before it is written. The arithmetic is the CPU's, operation by operation, with every product and sum
// rounded on its own (__fmul_rn and friends stop the compiler from fusing them into multiply-adds, which the
// CPU build does not do), so both devices take bit-identical steps.
template <bool kNesterov>
__global__ void MomentumSgdKernel(const float* grad, float* grad_out, float* moment, float* param,
                                  const float* lr, float momentum, float weight_decay, int64_t n) {
  const float rate = *lr;
  LOCKSTEP_KERNEL_LOOP(i, n) {
    const float decayed = __fmul_rn(rate, __fadd_rn(grad[i], __fmul_rn(weight_decay, param[i])));
    float adjusted;
    if (kNesterov) {
      const float m_old = moment[i];
      const float m_new = __fadd_rn(__fmul_rn(momentum, m_old), decayed);
      adjusted = __fsub_rn(__fmul_rn(__fadd_rn(1.0f, momentum), m_new), __fmul_rn(momentum, m_old));
      moment[i] = m_new;
    } else {
      adjusted = __fadd_rn(decayed, __fmul_rn(momentum, moment[i]));
      moment[i] = adjusted;
    }
    grad_out[i] = adjusted;
    param[i] = __fsub_rn(param[i], adjusted);
  }
}

class CudaMomentumSGDUpdateOp : public MomentumSGDUpdateBase {
 public:
  using MomentumSGDUpdateBase::MomentumSGDUpdateBase;

  void Run() override {
    auto [grad, moment, lr, param] = ReadInputs();
    if (grad.dtype() != DataType::kFloat)
      FailOperator(def_, fmt::format("the gradient '{}' is {}; the update is float32 (keep master weights "
                                     "and their gradients in float32)",
                                     InputName(0), DataTypeName(grad.dtype())));
    CheckMomentumSGDInputs(def_, grad, moment, lr, param);
    Tensor* grad_out = Output(0);
    grad_out->Resize(grad.shape());
    Tensor* moment_out = cuda::InPlaceState(moment, Output(1));
    Tensor* param_out = cuda::InPlaceState(param, Output(2));
    const int64_t n = grad.numel();
    if (n == 0) return;
    cudaStream_t stream = cuda::ContextFor(device().id).stream();
    auto kernel = args_.nesterov ? MomentumSgdKernel<true> : MomentumSgdKernel<false>;
    kernel<<<cuda::BlocksFor(n), cuda::kThreads, 0, stream>>>(
        grad.data<float>(), grad_out->data<float>(), moment_out->data<float>(), param_out->data<float>(),
        lr.data<float>(), args_.momentum, args_.weight_decay, n);
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(MomentumSGDUpdate, CudaMomentumSGDUpdateOp);

}  // namespace lockstep
