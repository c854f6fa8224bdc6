// Iter: the training iteration counter, an int64 scalar incremented in place once per run.
#include "lockstep/ops/iter_op.h"

#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/op_defs.h"

namespace lockstep {

void CheckIterCounter(const OperatorDef& def, const Tensor& iter) {
  CheckOneValue(def, iter, DataType::kInt64, "iter must be one int64 (ConstantFill it with dtype 10)");
}

namespace {

class IterOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& iter = Input(0);  // iter is () or (1,), int64; output 0 is the same blob
    CheckIterCounter(def_, iter);
    ++*Output(0)->data<int64_t>();
  }
};

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(Iter)
    .SetDoc("Adds 1 to the iteration counter, in place.")
    .Input(0, "iter", "one int64")
    .Output(0, "iter", "the same blob")
    .EnforceInplace({{0, 0}})
    .IdentityShape();
LOCKSTEP_REGISTER_CPU_OPERATOR(Iter, IterOp);
LOCKSTEP_NO_GRADIENT(Iter);

OperatorDef IterDef(const std::string& iter) { return MakeOperatorDef("Iter", {iter}, {iter}); }

}  // namespace lockstep
