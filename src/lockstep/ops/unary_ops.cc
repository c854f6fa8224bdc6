// Caffe2's Sigmoid, Tanh and Sqr on oneDNN's eltwise primitives (eltwise_op.h), in X's layout. Sigmoid's and
// Tanh's gradients read their output (dX = dY * Y * (1 - Y), dX = dY * (1 - Y^2)), so they may run in
// place; Sqr's reads its input (dX = 2 * X * dY), so it may not.
#include "lockstep/core/gradient.h"
#include "lockstep/ops/eltwise_op.h"

namespace lockstep {
namespace {

constexpr auto kSigmoid = dnnl::algorithm::eltwise_logistic;
constexpr auto kSigmoidFromOutput = dnnl::algorithm::eltwise_logistic_use_dst_for_bwd;
constexpr auto kTanh = dnnl::algorithm::eltwise_tanh;
constexpr auto kTanhFromOutput = dnnl::algorithm::eltwise_tanh_use_dst_for_bwd;
constexpr auto kSquare = dnnl::algorithm::eltwise_square;

void DeclareSqr(OpSchema& schema) {
  schema.Input(0, "X", "any shape")
      .Output(0, "Y", "X's shape; not X, which the gradient reads")
      .IdentityShape();
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(Sigmoid)
    .SetDoc("Y = 1 / (1 + exp(-X)), element-wise, in X's layout; may run in place.")
    .Include(DeclareEltwiseInPlace);
LOCKSTEP_OPERATOR_SCHEMA(SigmoidGradient)
    .SetDoc("dX = dY * Y * (1 - Y): Sigmoid's gradient, computed from its output.")
    .Include(DeclareEltwiseGradientFromOutput);
LOCKSTEP_OPERATOR_SCHEMA(Tanh)
    .SetDoc("Y = tanh(X), element-wise, in X's layout; may run in place.")
    .Include(DeclareEltwiseInPlace);
LOCKSTEP_OPERATOR_SCHEMA(TanhGradient)
    .SetDoc("dX = dY * (1 - Y^2): Tanh's gradient, computed from its output.")
    .Include(DeclareEltwiseGradientFromOutput);
LOCKSTEP_OPERATOR_SCHEMA(Sqr).SetDoc("Y = X * X, element-wise, in X's layout.").Include(DeclareSqr);
LOCKSTEP_OPERATOR_SCHEMA(SqrGradient)
    .SetDoc("dX = 2 * X * dY: Sqr's gradient, computed from its input.")
    .Include(DeclareEltwiseGradientFromInput);
LOCKSTEP_REGISTER_CPU_OPERATOR(Sigmoid, Eltwise<kSigmoid>);
LOCKSTEP_REGISTER_CPU_OPERATOR(SigmoidGradient, EltwiseGradient<kSigmoidFromOutput>);
LOCKSTEP_REGISTER_CPU_OPERATOR(Tanh, Eltwise<kTanh>);
LOCKSTEP_REGISTER_CPU_OPERATOR(TanhGradient, EltwiseGradient<kTanhFromOutput>);
LOCKSTEP_REGISTER_CPU_OPERATOR(Sqr, Eltwise<kSquare>);
LOCKSTEP_REGISTER_CPU_OPERATOR(SqrGradient, EltwiseGradient<kSquare>);
LOCKSTEP_REGISTER_GRADIENT(Sigmoid, EltwiseGradientFromOutput);
LOCKSTEP_REGISTER_GRADIENT(Tanh, EltwiseGradientFromOutput);
LOCKSTEP_REGISTER_GRADIENT(Sqr, EltwiseGradientFromInput);

}  // namespace lockstep
