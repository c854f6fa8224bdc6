// Softmax (Caffe2's): X seen as a matrix (the dims before `axis` make the rows, the rest the columns), each
// row normalized to probabilities by oneDNN, which subtracts the row max for stability. Its gradient needs
// only the output: dX = Y * (dY - sum over the row of dY * Y).
#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/dnnl_utils.h"

namespace lockstep {
namespace {

// X as (rows, columns) at `axis`, as Caffe2's Softmax coerces it.
Shape SoftmaxMatrix(const OperatorDef& def, const Shape& x) {
  const int64_t axis = IntArg(def, "axis");
  if (axis < 0 || axis >= static_cast<int64_t>(x.size()))
    FailOperator(def, fmt::format("axis {} is out of range for X {}; it must name one of X's dims", axis,
                                  ShapeToString(x)));
  int64_t rows = 1, columns = 1;
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) (i < axis ? rows : columns) *= x[i];
  return {rows, columns};
}

void CheckFloat(const OperatorDef& def, int input, const Tensor& tensor) {
  if (tensor.dtype() != DataType::kFloat)
    FailOperator(def, fmt::format("'{}' is {}; Softmax computes in float32, so Cast it first",
                                  def.input(input), DataTypeName(tensor.dtype())));
}

class SoftmaxOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& x = Input(0);  // x is any shape, float32
    CheckFloat(def_, 0, x);
    const Shape matrix = SoftmaxMatrix(def_, x.shape());  // (rows, columns)
    Tensor* y = Output(0);                                // y has x's shape
    y->Resize(x.shape());
    if (x.numel() == 0) return;
    const auto desc = PlainDesc(matrix);
    if (matrix != matrix_) {
      matrix_ = matrix;
      primitive_ = dnnl::softmax_forward(dnnl::softmax_forward::primitive_desc(
          CpuEngine(), dnnl::prop_kind::forward_training, dnnl::algorithm::softmax_accurate, desc, desc, 1));
    }
    Execute(primitive_, {{DNNL_ARG_SRC, ToMemory(x, desc)}, {DNNL_ARG_DST, ToMemory(*y, desc)}});
  }

 private:
  Shape matrix_;
  dnnl::softmax_forward primitive_;
};

class SoftmaxGradientOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& y = Input(0);   // y is Softmax's output
    const Tensor& dy = Input(1);  // dy has y's shape
    CheckFloat(def_, 0, y);
    CheckFloat(def_, 1, dy);
    if (dy.shape() != y.shape())
      FailOperator(def_, fmt::format("dY {} must have Y's shape {}", ShapeToString(dy.shape()),
                                     ShapeToString(y.shape())));
    const Shape matrix = SoftmaxMatrix(def_, y.shape());
    Tensor* dx = Output(0);  // dx has y's shape
    dx->Resize(y.shape());
    if (y.numel() == 0) return;
    const auto desc = PlainDesc(matrix);
    if (matrix != matrix_) {
      matrix_ = matrix;
      dnnl::softmax_forward::primitive_desc hint(CpuEngine(), dnnl::prop_kind::forward_training,
                                                 dnnl::algorithm::softmax_accurate, desc, desc, 1);
      primitive_ = dnnl::softmax_backward(dnnl::softmax_backward::primitive_desc(
          CpuEngine(), dnnl::algorithm::softmax_accurate, desc, desc, desc, 1, hint));
    }
    Execute(primitive_, {{DNNL_ARG_DST, ToMemory(y, desc)},
                         {DNNL_ARG_DIFF_DST, ToMemory(dy, desc)},
                         {DNNL_ARG_DIFF_SRC, ToMemory(*dx, desc)}});
  }

 private:
  Shape matrix_;
  dnnl::softmax_backward primitive_;
};

std::vector<OperatorDef> SoftmaxGradient(const GradientContext& g) {
  return {MakeOperatorDef("SoftmaxGradient", {g.O(0), g.GO(0)}, {g.GI(0)}, g.Args())};
}

std::vector<TensorShape> ShapeOfInput0(const OperatorDef& def, const std::vector<TensorShape>& in) {
  SoftmaxMatrix(def, in[0].dims);
  return {in[0]};
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(Softmax)
    .SetDoc(
        "Y = softmax of X's rows, X seen as a matrix whose rows are the dims before axis (Caffe2's Softmax); "
        "float32.")
    .Input(0, "X", "any shape with more than axis dims, float32")
    .Output(0, "Y", "X's shape; each row sums to 1")
    .Arg("axis", ArgType::kInt, 1, "the first dim of the columns; the dims before it make the rows")
    .Min(0)
    .ShapeFunction(ShapeOfInput0);
LOCKSTEP_OPERATOR_SCHEMA(SoftmaxGradient)
    .SetDoc("dX = Y * (dY - the row sums of dY * Y): Softmax's gradient, computed from its output.")
    .Input(0, "Y", "Softmax's output")
    .Input(1, "dY", "Y's shape")
    .Output(0, "dX", "Y's shape")
    .ArgsOf("Softmax")
    .ShapeFunction(ShapeOfInput0);
LOCKSTEP_REGISTER_CPU_OPERATOR(Softmax, SoftmaxOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(SoftmaxGradient, SoftmaxGradientOp);
LOCKSTEP_REGISTER_GRADIENT(Softmax, SoftmaxGradient);

}  // namespace lockstep
