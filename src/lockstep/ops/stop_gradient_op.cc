// StopGradient: Y = X in the forward pass, and no gradient flows back through it (Caffe2's StopGradient,
// which its programs put after their input, `data = model.StopGradient(data, data)`). It only copies through
// Tensor, so one class serves CPU and CUDA devices; in place it does nothing.
#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"

namespace lockstep {
namespace {

class StopGradientOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    if (!IsInplace(0, 0)) Output(0)->CopyFrom(Input(0));  // y is x's shape and dtype
  }
};

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(StopGradient)
    .SetDoc("Y = X; the backward pass stops here: nothing before it gets a gradient through it.")
    .Input(0, "X", "any shape and dtype")
    .Output(0, "Y", "X's shape and dtype; may be X")
    .AllowInplace({{0, 0}})
    .IdentityShape();
LOCKSTEP_REGISTER_CPU_OPERATOR(StopGradient, StopGradientOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(StopGradient, StopGradientOp);
LOCKSTEP_NO_GRADIENT(StopGradient);

}  // namespace lockstep
