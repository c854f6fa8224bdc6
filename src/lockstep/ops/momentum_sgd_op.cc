// MomentumSGDUpdate: Caffe2's in-place SGD step with momentum (plain or Nesterov) and L2 weight decay, in one
// pass over the parameter so the update costs a single read and write of each buffer.
#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"

namespace lockstep {
namespace {

class MomentumSGDUpdateOp : public Operator {
 public:
  MomentumSGDUpdateOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws),
        momentum_(FloatArg("momentum", 0.0f)),
        nesterov_(IntArg("nesterov", 0) != 0),
        weight_decay_(FloatArg("weight_decay", 0.0f)) {}

  void Run() override {
    const Tensor& grad = Input(0);    // grad is any shape
    const Tensor& moment = Input(1);  // moment has grad's shape; output 1 is the same blob
    const Tensor& lr = Input(2);      // lr is a float scalar, positive
    const Tensor& param = Input(3);   // param has grad's shape; output 2 is the same blob
    for (const Tensor* state : {&moment, &param}) {
      if (state->dtype() != DataType::kFloat || state->shape() != grad.shape())
        throw InvalidInput(fmt::format("{}: '{}' is {} {} but the gradient is float32 {}",
                                       DescribeOperator(def_), InputName(state == &moment ? 1 : 3),
                                       DataTypeName(state->dtype()), ShapeToString(state->shape()),
                                       ShapeToString(grad.shape())));
    }
    if (lr.dtype() != DataType::kFloat || lr.numel() != 1)
      throw InvalidInput(fmt::format("{}: lr must be one float, got {} of shape {}", DescribeOperator(def_),
                                     DataTypeName(lr.dtype()), ShapeToString(lr.shape())));
    Output(0)->Resize(grad.shape());
    const int64_t n = grad.numel();
    const float rate = *lr.data<float>();
    const float mu = momentum_;
    const float decay = weight_decay_;
    // Output 0 may alias grad; each element is read before it is written, so aliasing is safe.
    const float* g = grad.data<float>();
    float* g_out = Output(0)->data<float>();
    float* m = Output(1)->data<float>();
    float* p = Output(2)->data<float>();
    if (nesterov_) {
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

 private:
  float momentum_;
  bool nesterov_;
  float weight_decay_;
};

std::vector<TensorShape> InferMomentumSGDShape(const OperatorDef&, const std::vector<TensorShape>& in) {
  return {in.at(0), in.at(1), in.at(3)};
}

}  // namespace

// Inputs (grad, moment, lr, param), outputs (grad, moment, param) as in Caffe2.
LOCKSTEP_OPERATOR_SCHEMA(MomentumSGDUpdate)
    .NumInputs(4)
    .NumOutputs(3)
    .AllowInplace({{0, 0}})
    .EnforceInplace({{1, 1}, {3, 2}})
    .ShapeFunction(InferMomentumSGDShape);
LOCKSTEP_REGISTER_CPU_OPERATOR(MomentumSGDUpdate, MomentumSGDUpdateOp);
LOCKSTEP_NO_GRADIENT(MomentumSGDUpdate);

}  // namespace lockstep
