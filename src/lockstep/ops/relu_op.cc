// Relu: y = max(x, 0); its gradient dx = dy * (y > 0) reads y, so both may run in place.
#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/dnnl_utils.h"

namespace lockstep {
namespace {

class ReluOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& x = Input(0);  // x is any shape
    Tensor* y = Output(0);       // y has x's shape
    y->Resize(x.shape());
    if (x.numel() == 0) return;
    if (x.shape() != shape_) {
      shape_ = x.shape();
      auto desc = FlatDesc(x.numel());
      dnnl::eltwise_forward::desc op_desc(dnnl::prop_kind::forward_training, dnnl::algorithm::eltwise_relu, desc, 0.f);
      primitive_ = dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(op_desc, CpuEngine()));
    }
    auto desc = FlatDesc(x.numel());
    Execute(primitive_, {{DNNL_ARG_SRC, ToMemory(x, desc)}, {DNNL_ARG_DST, ToMemory(*y, desc)}});
  }

  static dnnl::memory::desc FlatDesc(int64_t n) { return PlainDesc({n}); }

 private:
  Shape shape_;
  dnnl::eltwise_forward primitive_;
};

class ReluGradientOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& y = Input(0);   // y is the forward output
    const Tensor& dy = Input(1);  // dy has y's shape
    Tensor* dx = Output(0);
    LOCKSTEP_ENFORCE(y.shape() == dy.shape(), "ReluGradient: y {} vs dy {}", ShapeToString(y.shape()),
                     ShapeToString(dy.shape()));
    dx->Resize(y.shape());
    if (y.numel() == 0) return;
    auto desc = ReluOp::FlatDesc(y.numel());
    if (y.shape() != shape_) {
      shape_ = y.shape();
      dnnl::eltwise_forward::desc forward_desc(dnnl::prop_kind::forward_training,
                                               dnnl::algorithm::eltwise_relu_use_dst_for_bwd, desc, 0.f);
      dnnl::eltwise_forward::primitive_desc hint(forward_desc, CpuEngine());
      dnnl::eltwise_backward::desc op_desc(dnnl::algorithm::eltwise_relu_use_dst_for_bwd, desc, desc, 0.f);
      primitive_ = dnnl::eltwise_backward(dnnl::eltwise_backward::primitive_desc(op_desc, CpuEngine(), hint));
    }
    Execute(primitive_, {{DNNL_ARG_DST, ToMemory(y, desc)},
                         {DNNL_ARG_DIFF_DST, ToMemory(dy, desc)},
                         {DNNL_ARG_DIFF_SRC, ToMemory(*dx, desc)}});
  }

 private:
  Shape shape_;
  dnnl::eltwise_backward primitive_;
};

std::vector<OperatorDef> ReluGradient(const GradientContext& g) {
  return {MakeOperatorDef("ReluGradient", {g.O(0), g.GO(0)}, {g.GI(0)})};
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(Relu).NumInputs(1).NumOutputs(1).AllowInplace({{0, 0}}).IdentityShape();
LOCKSTEP_OPERATOR_SCHEMA(ReluGradient).NumInputs(2).NumOutputs(1).AllowInplace({{1, 0}});
LOCKSTEP_REGISTER_CPU_OPERATOR(Relu, ReluOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(ReluGradient, ReluGradientOp);
LOCKSTEP_REGISTER_GRADIENT(Relu, ReluGradient);

}  // namespace lockstep
