// Alias: Y becomes a view of X, the same buffer under another name (Caffe2's Alias). Replicas that share one
// copy of the parameters keep their parameter names this way (parallel/shared_parameters.h). The view holds
// while neither tensor is resized beyond the buffer, as parameters never are.
#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"

namespace lockstep {
namespace {

class AliasOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override { *Output(0) = InputAsStored(0); }  // the tensor's shape, dtype, layout and buffer
};

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(Alias)
    .SetDoc("Y shares X's buffer: a view under another name, which sees every later write to X.")
    .Input(0, "X", "any shape and dtype")
    .Output(0, "Y", "a view of X")
    .IdentityShape();
LOCKSTEP_REGISTER_CPU_OPERATOR(Alias, AliasOp);
LOCKSTEP_NO_GRADIENT(Alias);

}  // namespace lockstep
