// SoftmaxWithLoss: softmax over the classes (oneDNN, which subtracts the row max for stability) and the mean
// cross-entropy of the labelled class; its gradient is (softmax - onehot) * dloss * scale / N.
#include <algorithm>
#include <cmath>

#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/class_labels.h"
#include "lockstep/ops/dnnl_utils.h"

namespace lockstep {
namespace {

// Probabilities below this count as this, so a confidently wrong row costs -log(1e-20) = 46 rather than inf.
constexpr float kMinProbability = 1e-20f;

// logits is (N, D); labels is (N) or (N, 1) int32. The mean over an empty batch is undefined.
class SoftmaxWithLossOp : public Operator {
 public:
  SoftmaxWithLossOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws), scale_(FloatArg("scale")) {}

  void Run() override {
    const Tensor& logits = Input(0);  // logits is (N, D)
    const Tensor& labels = Input(1);  // labels is (N) or (N, 1), int32 in [0, D)
    CheckSoftmaxWithLossShapes(def_, logits.shape(), labels.shape(), labels.dtype());
    if (logits.dtype() != DataType::kFloat)
      FailOperator(def_, fmt::format("logits are {}; the loss is computed in float32, so Cast them first",
                                     DataTypeName(logits.dtype())));
    Tensor* softmax = Output(0);  // softmax is (N, D)
    Tensor* loss = Output(1);     // loss is a scalar
    softmax->Resize(logits.shape());
    loss->Resize({});
    if (logits.shape() != shape_) {
      shape_ = logits.shape();
      primitive_ = dnnl::softmax_forward(dnnl::softmax_forward::primitive_desc(
          CpuEngine(), dnnl::prop_kind::forward_training, dnnl::algorithm::softmax_accurate, PlainDesc(shape_),
          PlainDesc(shape_), 1));
    }
    auto desc = PlainDesc(shape_);
    Execute(primitive_, {{DNNL_ARG_SRC, ToMemory(logits, desc)}, {DNNL_ARG_DST, ToMemory(*softmax, desc)}});

    int64_t n = logits.dim(0), d = logits.dim(1);
    const float* probability = softmax->data<float>();
    const int32_t* label = labels.data<int32_t>();
    double total = 0;
    for (int64_t i = 0; i < n; ++i)
      total -= std::log(std::max(probability[i * d + CheckedClassLabel(def_, label, i, d)], kMinProbability));
    loss->data<float>()[0] = static_cast<float>(total / n * scale_);
  }

 private:
  float scale_;
  Shape shape_;
  dnnl::softmax_forward primitive_;
};

class SoftmaxWithLossGradientOp : public Operator {
 public:
  SoftmaxWithLossGradientOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), scale_(FloatArg("scale")) {}

  void Run() override {
    const Tensor& logits = Input(0);   // logits is (N, D)
    const Tensor& labels = Input(1);   // labels is (N) or (N, 1)
    const Tensor& softmax = Input(2);  // softmax is (N, D)
    const Tensor& dloss = Input(3);    // dloss is a scalar
    CheckSoftmaxWithLossGradientInputs(def_, logits, labels, softmax, dloss);
    Tensor* dlogits = Output(0);  // dlogits is (N, D)
    dlogits->CopyFrom(softmax);
    int64_t n = logits.dim(0), d = logits.dim(1);
    float* grad = dlogits->data<float>();
    const int32_t* label = labels.data<int32_t>();
    for (int64_t i = 0; i < n; ++i) grad[i * d + CheckedClassLabel(def_, label, i, d)] -= 1.f;
    const float factor = dloss.data<float>()[0] * scale_ / n;
    for (int64_t j = 0; j < n * d; ++j) grad[j] *= factor;
  }

 private:
  float scale_;
};

std::vector<OperatorDef> SoftmaxWithLossGradient(const GradientContext& g) {
  // As in Caffe2, the softmax output is a by-product: gradient flows from the loss only.
  if (!g.GO(0).empty())
    FailOperator(g.def, fmt::format("only the loss output can be differentiated, not the softmax output '{}'",
                                    g.O(0)));
  return {MakeOperatorDef("SoftmaxWithLossGradient", {g.I(0), g.I(1), g.O(0), g.GO(1)}, {g.GI(0)}, g.Args())};
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(SoftmaxWithLoss)
    .SetDoc("Softmax over the classes and the mean cross-entropy of the labelled class, times scale.")
    .Input(0, "logits", "(N, D)")
    .Input(1, "labels", "(N) or (N, 1) int32 in [0, D)")
    .Output(0, "softmax", "(N, D)")
    .Output(1, "loss", "a float scalar")
    .Arg("scale", ArgType::kFloat, 1.0f, "multiplies the loss (and so its gradient)")
    .ShapeFunction([](const OperatorDef& def, const std::vector<TensorShape>& in) {
      CheckSoftmaxWithLossShapes(def, in[0].dims, in[1].dims, in[1].dtype);
      return std::vector<TensorShape>{in[0], {{}, DataType::kFloat}};
    });
LOCKSTEP_OPERATOR_SCHEMA(SoftmaxWithLossGradient)
    .SetDoc("dlogits = (softmax - onehot(labels)) * dloss * scale / N: SoftmaxWithLoss's gradient.")
    .Input(0, "logits", "(N, D)")
    .Input(1, "labels", "(N) or (N, 1) int32")
    .Input(2, "softmax", "SoftmaxWithLoss's softmax")
    .Input(3, "dloss", "a float scalar")
    .Output(0, "dlogits", "(N, D)")
    .ArgsOf("SoftmaxWithLoss")
    .IdentityShape();
LOCKSTEP_REGISTER_CPU_OPERATOR(SoftmaxWithLoss, SoftmaxWithLossOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(SoftmaxWithLossGradient, SoftmaxWithLossGradientOp);
LOCKSTEP_REGISTER_GRADIENT(SoftmaxWithLoss, SoftmaxWithLossGradient);

}  // namespace lockstep
