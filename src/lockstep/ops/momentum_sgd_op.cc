// MomentumSGDUpdate: Caffe2's in-place SGD step with momentum (plain or Nesterov) and L2 weight decay, in one
// pass over the parameter so the update costs a single read and write of each buffer.
#include "lockstep/ops/momentum_sgd_op.h"

#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/op_defs.h"

namespace lockstep {

MomentumSGDArgs ParseMomentumSGDArgs(const OperatorDef& def) {
  return {FloatArg(def, "momentum"), IntArg(def, "nesterov") != 0, FloatArg(def, "weight_decay")};
}

void CheckMomentumSGDInputs(const OperatorDef& def, const Tensor& grad, const Tensor& moment,
                            const Tensor& lr, const Tensor& param) {
  CheckOneValue(def, lr, DataType::kFloat, "lr must be one float");
  for (const Tensor* state : {&moment, &param}) {
    if (state->dtype() != DataType::kFloat || state->shape() != grad.shape())
      FailOperator(def, fmt::format("'{}' is {} {} but the gradient is float32 {}",
                                    def.input(state == &moment ? 1 : 3), DataTypeName(state->dtype()),
                                    ShapeToString(state->shape()), ShapeToString(grad.shape())));
  }
}

namespace {

class MomentumSGDUpdateOp : public MomentumSGDUpdateBase {
 public:
  using MomentumSGDUpdateBase::MomentumSGDUpdateBase;

  void Run() override {
    auto [grad, moment, lr, param] = ReadInputs();
    CheckMomentumSGDInputs(def_, grad, moment, lr, param);
    Output(0)->Resize(grad.shape());
    const int64_t n = grad.numel();
    const float rate = *lr.data<float>();
    const float mu = args_.momentum;
    const float decay = args_.weight_decay;
    // Output 0 may alias grad; each element is read before it is written, so aliasing is safe.
    const float* g = grad.data<float>();
    float* g_out = Output(0)->data<float>();
    float* m = Output(1)->data<float>();
    float* p = Output(2)->data<float>();
    if (args_.nesterov) {
      for (int64_t i = 0; i < n; ++i) {
        const float m_old = m[i];
        const float m_new = mu * m_old + rate * (g[i] + decay * p[i]);
        const float adjusted = (1.0f + mu) * m_new - mu * m_old;
        m[i] = m_new;
        g_out[i] = adjusted;
        p[i] -= adjusted;
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        const float adjusted = rate * (g[i] + decay * p[i]) + mu * m[i];
        m[i] = adjusted;
        g_out[i] = adjusted;
        p[i] -= adjusted;
      }
    }
  }
};

std::vector<TensorShape> InferMomentumSGDShape(const OperatorDef&, const std::vector<TensorShape>& in) {
  return {in.at(0), in.at(1), in.at(3)};
}

}  // namespace

// Inputs (grad, moment, lr, param), outputs (grad, moment, param) as in Caffe2.
LOCKSTEP_OPERATOR_SCHEMA(MomentumSGDUpdate)
    .SetDoc(
        "Caffe2's SGD step with momentum, in place: moment = momentum * moment + lr * (grad + weight_decay * "
        "param); param -= moment (Nesterov: param -= (1 + momentum) * moment_new - momentum * moment_old). "
        "grad gets the applied step.")
    .Input(0, "grad", "param's shape")
    .Input(1, "moment", "param's shape")
    .Input(2, "lr", "a float scalar")
    .Input(3, "param", "float")
    .Output(0, "grad", "the step applied; may be input 0")
    .Output(1, "moment", "input 1, updated")
    .Output(2, "param", "input 3, updated")
    .Arg("momentum", ArgType::kFloat, 0.0f, "how much of the previous step carries over")
    .RangeBelow(0, 1)
    .Arg("nesterov", ArgType::kInt, 0, "1: Nesterov's momentum")
    .Range(0, 1)
    .Arg("weight_decay", ArgType::kFloat, 0.0f, "L2 weight decay added to the gradient")
    .Min(0)
    .AllowInplace({{0, 0}})
    .EnforceInplace({{1, 1}, {3, 2}})
    .ShapeFunction(InferMomentumSGDShape);
LOCKSTEP_REGISTER_CPU_OPERATOR(MomentumSGDUpdate, MomentumSGDUpdateOp);
LOCKSTEP_NO_GRADIENT(MomentumSGDUpdate);

OperatorDef MomentumSgdUpdateDef(const std::string& grad, const std::string& moment, const std::string& lr,
                                 const std::string& param, float momentum, bool nesterov,
                                 float weight_decay) {
  return MakeOperatorDef(
      "MomentumSGDUpdate", {grad, moment, lr, param}, {grad, moment, param},
      {Arg("momentum", momentum), Arg("nesterov", nesterov), Arg("weight_decay", weight_decay)});
}

}  // namespace lockstep
