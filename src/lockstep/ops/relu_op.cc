// Relu: y = max(x, 0), and LeakyRelu (Caffe2's): y = x > 0 ? x : alpha * x with arg alpha >= 0; Relu is
// LeakyRelu with alpha 0. Their gradients dx = dy * (y > 0 ? 1 : alpha) read y, so all may run
// in place. All keep the layout their input comes in.
#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/dnnl_utils.h"

namespace lockstep {

namespace {

template <bool kLeaky>
class ReluOp : public Operator {
 public:
  ReluOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws), alpha_(kLeaky ? FloatArg("alpha") : 0) {
    AcceptLayouts();
  }

  void Run() override {
    const Tensor& x = Input(0);  // x is any shape, any layout
    Tensor* y = Output(0);       // y has x's shape and layout
    auto desc = DescOf(x);
    dnnl::memory src = AsMemory(x);
    dnnl::memory dst = ResizeForDesc(y, x.shape(), desc);
    if (x.numel() == 0) return;
    if (desc != desc_) {
      desc_ = desc;
      primitive_ = dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(
          CpuEngine(), dnnl::prop_kind::forward_training, dnnl::algorithm::eltwise_relu, desc, desc, alpha_));
    }
    Execute(primitive_, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  }

 private:
  const float alpha_;
  dnnl::memory::desc desc_;
  dnnl::eltwise_forward primitive_;
};

// With alpha >= 0, y > 0 exactly where x > 0, so the gradient can be computed from y.
template <bool kLeaky>
class ReluGradientOp : public Operator {
 public:
  ReluGradientOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), alpha_(kLeaky ? FloatArg("alpha") : 0) {
    AcceptLayouts();
  }

  void Run() override {
    const Tensor& y = Input(0);   // y is the forward output
    const Tensor& dy = Input(1);  // dy has y's shape, any layout
    Tensor* dx = Output(0);       // dx has y's shape and layout
    if (y.shape() != dy.shape())
      FailOperator(def_, fmt::format("dY {} must have Y's shape {}", ShapeToString(dy.shape()),
                                     ShapeToString(y.shape())));
    auto desc = DescOf(y);
    dnnl::memory dst = AsMemory(y);
    dnnl::memory diff_dst = ReorderIfNeeded(AsMemory(dy), desc, 0);
    dnnl::memory diff_src = ResizeForDesc(dx, y.shape(), desc);
    if (y.numel() == 0) return;
    if (desc != desc_) {
      desc_ = desc;
      auto algorithm = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
      dnnl::eltwise_forward::primitive_desc hint(CpuEngine(), dnnl::prop_kind::forward_training, algorithm, desc,
                                                 desc, alpha_);
      primitive_ = dnnl::eltwise_backward(
          dnnl::eltwise_backward::primitive_desc(CpuEngine(), algorithm, desc, desc, desc, alpha_, hint));
    }
    Execute(primitive_, {{DNNL_ARG_DST, dst}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src}});
  }

 private:
  const float alpha_;
  dnnl::memory::desc desc_;
  dnnl::eltwise_backward primitive_;
};

std::vector<OperatorDef> ReluGradient(const GradientContext& g) {
  return {MakeOperatorDef("ReluGradient", {g.O(0), g.GO(0)}, {g.GI(0)})};
}

std::vector<OperatorDef> LeakyReluGradient(const GradientContext& g) {
  return {MakeOperatorDef("LeakyReluGradient", {g.O(0), g.GO(0)}, {g.GI(0)}, g.Args())};
}

std::vector<TensorShape> ShapeOfY(const OperatorDef&, const std::vector<TensorShape>& in) { return {in[0]}; }

// What Relu and LeakyRelu share: X -> Y element-wise, in place or not.
void DeclareRelu(OpSchema& schema) {
  schema.Input(0, "X", "any shape")
      .Output(0, "Y", "X's shape")
      .NumInputs(1)
      .NumOutputs(1)
      .AllowInplace({{0, 0}})
      .IdentityShape();
}

// What their gradients share: (Y, dY) -> dX from the forward op's output, dX in place of dY or not.
template <bool kLeaky>
void DeclareReluGradient(OpSchema& schema) {
  const std::string forward = kLeaky ? "LeakyRelu" : "Relu";
  schema.Input(0, "Y", forward + "'s output")
      .Input(1, "dY", "Y's shape")
      .Output(0, "dX", "Y's shape; may be dY")
      .NumInputs(2)
      .NumOutputs(1)
      .AllowInplace({{1, 0}})
      .ShapeFunction(ShapeOfY);
  if (kLeaky) schema.ArgsOf(forward);  // alpha
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(Relu)
    .SetDoc("Y = max(X, 0), element-wise, in X's layout; may run in place.")
    .Include(DeclareRelu);
LOCKSTEP_OPERATOR_SCHEMA(ReluGradient)
    .SetDoc("dX = dY where Y > 0, else 0: Relu's gradient, computed from its output.")
    .Include(DeclareReluGradient<false>);
LOCKSTEP_OPERATOR_SCHEMA(LeakyRelu)
    .SetDoc("Y = X > 0 ? X : alpha * X, element-wise (Caffe2's LeakyRelu); may run in place.")
    .Include(DeclareRelu)
    .Arg("alpha", ArgType::kFloat, 0.01f,
         "slope for X < 0; not negative, since the gradient is computed from Y, which needs Y > 0 exactly "
         "where X > 0")
    .Min(0);
LOCKSTEP_OPERATOR_SCHEMA(LeakyReluGradient)
    .SetDoc("dX = dY * (Y > 0 ? 1 : alpha): LeakyRelu's gradient, computed from its output.")
    .Include(DeclareReluGradient<true>);
LOCKSTEP_REGISTER_CPU_OPERATOR(Relu, ReluOp<false>);
LOCKSTEP_REGISTER_CPU_OPERATOR(ReluGradient, ReluGradientOp<false>);
LOCKSTEP_REGISTER_CPU_OPERATOR(LeakyRelu, ReluOp<true>);
LOCKSTEP_REGISTER_CPU_OPERATOR(LeakyReluGradient, ReluGradientOp<true>);
LOCKSTEP_REGISTER_GRADIENT(Relu, ReluGradient);
LOCKSTEP_REGISTER_GRADIENT(LeakyRelu, LeakyReluGradient);

}  // namespace lockstep
