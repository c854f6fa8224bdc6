// Accuracy: the fraction of rows whose label is among the top_k scores. Ties follow Caffe2: a label counts
// when fewer than top_k scores are strictly greater than its own.
#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/class_labels.h"

namespace lockstep {
namespace {

class AccuracyOp : public Operator {
 public:
  AccuracyOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws), top_k_(IntArg("top_k")) {}

  void Run() override {
    const Tensor& predictions = Input(0);  // predictions is (N, D): scores or probabilities
    const Tensor& labels = Input(1);       // labels is (N) or (N, 1), int32 in [0, D)
    CheckClassLabelShapes(def_, "predictions", predictions.shape(), labels.shape(), labels.dtype());
    Tensor* accuracy = Output(0);  // accuracy is a scalar in [0, 1]
    accuracy->Resize({});
    int64_t n = predictions.dim(0), d = predictions.dim(1);
    const float* scores = predictions.data<float>();
    const int32_t* label = labels.data<int32_t>();
    int64_t correct = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* row = scores + i * d;
      const float own = row[CheckedClassLabel(def_, label, i, d)];
      int64_t greater = 0;
      for (int64_t j = 0; j < d && greater < top_k_; ++j) greater += row[j] > own;
      correct += greater < top_k_;
    }
    accuracy->data<float>()[0] = n > 0 ? static_cast<float>(correct) / n : 0.f;
  }

 private:
  int64_t top_k_;
};

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(Accuracy)
    .SetDoc("The fraction of rows whose label is among the top_k scores (ties as in Caffe2).")
    .Input(0, "predictions", "(N, D) scores or probabilities")
    .Input(1, "labels", "(N) or (N, 1) int32 in [0, D)")
    .Output(0, "accuracy", "a float scalar in [0, 1]")
    .Arg("top_k", ArgType::kInt, 1, "a row counts when its label is among its top_k scores")
    .Min(1)
    .ShapeFunction([](const OperatorDef& def, const std::vector<TensorShape>& in) {
      CheckClassLabelShapes(def, "predictions", in[0].dims, in[1].dims, in[1].dtype);
      return std::vector<TensorShape>{{{}, DataType::kFloat}};
    });
LOCKSTEP_REGISTER_CPU_OPERATOR(Accuracy, AccuracyOp);
LOCKSTEP_NO_GRADIENT(Accuracy);

}  // namespace lockstep
