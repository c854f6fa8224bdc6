// Copy: y = x for any dtype (the building block of cross-device transfers); its gradient copies dy back.
#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"

namespace lockstep {
namespace {

class CopyOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    // x is any shape and dtype; y gets both
    Output(0)->CopyFrom(Input(0));
  }
};

std::vector<OperatorDef> CopyGradient(const GradientContext& g) {
  return {MakeOperatorDef("Copy", {g.GO(0)}, {g.GI(0)})};
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(Copy).NumInputs(1).NumOutputs(1).IdentityShape();
LOCKSTEP_REGISTER_CPU_OPERATOR(Copy, CopyOp);
LOCKSTEP_REGISTER_GRADIENT(Copy, CopyGradient);

}  // namespace lockstep
