// Relu: y = max(x, 0), and LeakyRelu (Caffe2's): y = x > 0 ? x : alpha * x with arg alpha >= 0; Relu is
// LeakyRelu with alpha 0. Their gradients dx = dy * (y > 0 ? 1 : alpha) read y, so all may run
// in place. All keep the layout their input comes in (eltwise_op.h).
#include "lockstep/core/gradient.h"
#include "lockstep/ops/eltwise_op.h"

namespace lockstep {

namespace {

constexpr auto kRelu = dnnl::algorithm::eltwise_relu;
// With alpha >= 0, y > 0 exactly where x > 0, so the gradient can be computed from y.
constexpr auto kReluFromOutput = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;

class LeakyReluOp : public EltwiseOp {
 public:
  LeakyReluOp(const OperatorDef& def, Workspace* ws)
      : EltwiseOp(def, ws, kRelu, lockstep::FloatArg(def, "alpha")) {}
};

class LeakyReluGradientOp : public EltwiseGradientOp {
 public:
  LeakyReluGradientOp(const OperatorDef& def, Workspace* ws)
      : EltwiseGradientOp(def, ws, kReluFromOutput, lockstep::FloatArg(def, "alpha")) {}
};

void DeclareLeakyReluGradient(OpSchema& schema) {
  schema.Include(DeclareEltwiseGradientFromOutput).ArgsOf("LeakyRelu");  // alpha
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(Relu)
    .SetDoc("Y = max(X, 0), element-wise, in X's layout; may run in place.")
    .Include(DeclareEltwiseInPlace);
LOCKSTEP_OPERATOR_SCHEMA(ReluGradient)
    .SetDoc("dX = dY where Y > 0, else 0: Relu's gradient, computed from its output.")
    .Include(DeclareEltwiseGradientFromOutput);
LOCKSTEP_OPERATOR_SCHEMA(LeakyRelu)
    .SetDoc("Y = X > 0 ? X : alpha * X, element-wise (Caffe2's LeakyRelu); may run in place.")
    .Include(DeclareEltwiseInPlace)
    .Arg("alpha", ArgType::kFloat, 0.01f,
         "slope for X < 0; not negative, since the gradient is computed from Y, which needs Y > 0 exactly "
         "where X > 0")
    .Min(0);
LOCKSTEP_OPERATOR_SCHEMA(LeakyReluGradient)
    .SetDoc("dX = dY * (Y > 0 ? 1 : alpha): LeakyRelu's gradient, computed from its output.")
    .Include(DeclareLeakyReluGradient);
LOCKSTEP_REGISTER_CPU_OPERATOR(Relu, Eltwise<kRelu>);
LOCKSTEP_REGISTER_CPU_OPERATOR(ReluGradient, EltwiseGradient<kReluFromOutput>);
LOCKSTEP_REGISTER_CPU_OPERATOR(LeakyRelu, LeakyReluOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(LeakyReluGradient, LeakyReluGradientOp);
LOCKSTEP_REGISTER_GRADIENT(Relu, EltwiseGradientFromOutput);
LOCKSTEP_REGISTER_GRADIENT(LeakyRelu, EltwiseGradientFromOutput);

}  // namespace lockstep
