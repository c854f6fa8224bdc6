// Iter on CUDA devices: the iteration counter stays a one-element int64 tensor, in device memory, incremented
// by a one-thread kernel so that the step never waits for the host.
#include "lockstep/core/operator.h"
#include "lockstep/cuda/cuda_context.h"
#include "lockstep/ops/cuda/cuda_kernels.cuh"
#include "lockstep/ops/iter_op.h"

namespace lockstep {
namespace {

// iter is one int64.
__global__ void IterKernel(int64_t* iter) { ++*iter; }

class CudaIterOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& iter = Input(0);  // iter is () or (1,), int64; output 0 is the same blob
    CheckIterCounter(def_, iter);
    Tensor* counter = cuda::InPlaceState(iter, Output(0));
    IterKernel<<<1, 1, 0, cuda::ContextFor(device().id).stream()>>>(counter->data<int64_t>());
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(Iter, CudaIterOp);

}  // namespace lockstep
