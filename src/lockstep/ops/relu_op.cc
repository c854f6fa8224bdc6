// Relu: y = max(x, 0); its gradient dx = dy * (y > 0) reads y, so both may run in place. Both keep the
// layout their input comes in.
#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/dnnl_utils.h"

namespace lockstep {
namespace {

class ReluOp : public Operator {
 public:
  ReluOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws) { AcceptLayouts(); }

  void Run() override {
    const Tensor& x = Input(0);  // x is any shape, any layout
    Tensor* y = Output(0);       // y has x's shape and layout
    auto desc = DescOf(x);
    dnnl::memory src = AsMemory(x);
    dnnl::memory dst = ResizeForDesc(y, x.shape(), desc);
    if (x.numel() == 0) return;
    if (desc != desc_) {
      desc_ = desc;
      dnnl::eltwise_forward::desc op_desc(dnnl::prop_kind::forward_training, dnnl::algorithm::eltwise_relu,
                                          desc, 0.f);
      primitive_ = dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(op_desc, CpuEngine()));
    }
    Execute(primitive_, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  }

 private:
  dnnl::memory::desc desc_;
  dnnl::eltwise_forward primitive_;
};

class ReluGradientOp : public Operator {
 public:
  ReluGradientOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws) { AcceptLayouts(); }

  void Run() override {
    const Tensor& y = Input(0);   // y is the forward output
    const Tensor& dy = Input(1);  // dy has y's shape, any layout
    Tensor* dx = Output(0);       // dx has y's shape and layout
    LOCKSTEP_ENFORCE(y.shape() == dy.shape(), "ReluGradient: y {} vs dy {}", ShapeToString(y.shape()),
                     ShapeToString(dy.shape()));
    auto desc = DescOf(y);
    dnnl::memory dst = AsMemory(y);
    dnnl::memory diff_dst = ReorderIfNeeded(AsMemory(dy), desc, &dy_scratch_);
    dnnl::memory diff_src = ResizeForDesc(dx, y.shape(), desc);
    if (y.numel() == 0) return;
    if (desc != desc_) {
      desc_ = desc;
      auto algorithm = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
      dnnl::eltwise_forward::desc forward_desc(dnnl::prop_kind::forward_training, algorithm, desc, 0.f);
      dnnl::eltwise_forward::primitive_desc hint(forward_desc, CpuEngine());
      dnnl::eltwise_backward::desc op_desc(algorithm, desc, desc, 0.f);
      primitive_ = dnnl::eltwise_backward(dnnl::eltwise_backward::primitive_desc(op_desc, CpuEngine(), hint));
    }
    Execute(primitive_, {{DNNL_ARG_DST, dst}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src}});
  }

 private:
  dnnl::memory::desc desc_;
  dnnl::memory dy_scratch_;
  dnnl::eltwise_backward primitive_;
};

std::vector<OperatorDef> ReluGradient(const GradientContext& g) {
  return {MakeOperatorDef("ReluGradient", {g.O(0), g.GO(0)}, {g.GI(0)})};
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(Relu).NumInputs(1).NumOutputs(1).AllowInplace({{0, 0}}).IdentityShape();
LOCKSTEP_OPERATOR_SCHEMA(ReluGradient)
    .NumInputs(2)
    .NumOutputs(1)
    .AllowInplace({{1, 0}})
    .ShapeFunction([](const OperatorDef&, const std::vector<TensorShape>& in) {
      return std::vector<TensorShape>{in[0]};
    });
LOCKSTEP_REGISTER_CPU_OPERATOR(Relu, ReluOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(ReluGradient, ReluGradientOp);
LOCKSTEP_REGISTER_GRADIENT(Relu, ReluGradient);

}  // namespace lockstep
