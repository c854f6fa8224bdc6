// WeightedSum: y = sum_i w_i * x_i over pairs (x_i, w_i) with scalar float weights; y may be x_0 (in place),
// which is how parameter averaging and plain SGD steps are written.
#include "lockstep/ops/weighted_sum_op.h"

#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"

namespace lockstep {

void CheckWeightedSumArity(const OperatorDef& def) {
  if (def.input_size() % 2 != 0)
    FailOperator(def,
                 fmt::format("inputs must be pairs (X0, w0, X1, w1, ...), got {} inputs", def.input_size()));
}

void CheckWeightedSumPair(const OperatorDef& def, int i, const Tensor& x, const Tensor& w, const Tensor& x0) {
  if (x.dtype() != DataType::kFloat || x.shape() != x0.shape())
    FailOperator(def, fmt::format("'{}' is {} {}, expected float32 {}", def.input(i), DataTypeName(x.dtype()),
                                  ShapeToString(x.shape()), ShapeToString(x0.shape())));
  CheckOneValue(def, w, DataType::kFloat, fmt::format("weight '{}' must be one float", def.input(i + 1)));
}

namespace {

class WeightedSumOp : public Operator {
 public:
  WeightedSumOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws) { CheckWeightedSumArity(def); }

  void Run() override {
    const Tensor& x0 = Input(0);  // every x_i has x0's shape
    for (int i = 0; i < InputSize(); i += 2) CheckWeightedSumPair(def_, i, Input(i), Input(i + 1), x0);
    Tensor* y = Output(0);
    y->Resize(x0.shape());
    const int64_t n = x0.numel();
    // y may alias x0 only, so x0 is consumed by the first pass before any other input is added.
    float* out = y->data<float>();
    const float* in = x0.data<float>();
    const float w0 = *Input(1).data<float>();
    for (int64_t j = 0; j < n; ++j) out[j] = w0 * in[j];
    for (int i = 2; i < InputSize(); i += 2) {
      const float* x = Input(i).data<float>();
      const float w = *Input(i + 1).data<float>();
      for (int64_t j = 0; j < n; ++j) out[j] += w * x[j];
    }
  }
};

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(WeightedSum)
    .SetDoc("Y = sum_i w_i * X_i over the pairs (X_i, w_i); Y may be X_0.")
    .Input(0, "X_0, w_0, X_1, w_1, ...", "X_i of X_0's shape, w_i a float scalar")
    .Output(0, "Y", "X_0's shape; may be X_0")
    .NumInputs(2, INT_MAX)
    .AllowInplace({{0, 0}})
    .IdentityShape();
LOCKSTEP_REGISTER_CPU_OPERATOR(WeightedSum, WeightedSumOp);
LOCKSTEP_NO_GRADIENT(WeightedSum);

}  // namespace lockstep
