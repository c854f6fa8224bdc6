// Copy: y = x for any dtype (the building block of cross-device transfers); its gradient copies dy back. y is
// in the memory of the op's device, x in any: the same class serves CPU and CUDA devices, since Tensor
// copies across memories.
#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/op_defs.h"

namespace lockstep {
namespace {

class CopyOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    // x is any shape and dtype, in any memory; y gets both. A plain x is copied straight from where it is;
    // only a backend layout needs Input()'s plain conversion first.
    const Tensor& x = InputAsStored(0);
    Output(0)->CopyFrom(x.is_plain() ? x : Input(0));
  }
};

std::vector<OperatorDef> CopyGradient(const GradientContext& g) {
  return {MakeOperatorDef("Copy", {g.GO(0)}, {g.GI(0)})};
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(Copy)
    .SetDoc("Y = X, into the memory of the op's device from wherever X lives.")
    .Input(0, "X", "any shape, on any device")
    .Output(0, "Y", "X on the op's device")
    .IdentityShape()
    .ReadsAnyDevice();
LOCKSTEP_REGISTER_CPU_OPERATOR(Copy, CopyOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(Copy, CopyOp);
LOCKSTEP_REGISTER_GRADIENT(Copy, CopyGradient);

OperatorDef CopyDef(const std::string& from, const std::string& to) {
  return MakeOperatorDef("Copy", {from}, {to});
}

}  // namespace lockstep
