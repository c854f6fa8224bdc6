// The classes, gradient makers and schema parts that the unary element-wise operators share (eltwise_op.h).
#include "lockstep/ops/eltwise_op.h"

#include "lockstep/core/gradient.h"

namespace lockstep {
namespace {

bool ReadsOutput(dnnl::algorithm algorithm) {
  switch (algorithm) {
    case dnnl::algorithm::eltwise_relu_use_dst_for_bwd:
    case dnnl::algorithm::eltwise_logistic_use_dst_for_bwd:
    case dnnl::algorithm::eltwise_tanh_use_dst_for_bwd:
    case dnnl::algorithm::eltwise_exp_use_dst_for_bwd:
    case dnnl::algorithm::eltwise_sqrt_use_dst_for_bwd:
    case dnnl::algorithm::eltwise_elu_use_dst_for_bwd:
    case dnnl::algorithm::eltwise_clip_v2_use_dst_for_bwd:
      return true;
    default:
      return false;
  }
}

}  // namespace

EltwiseOp::EltwiseOp(const OperatorDef& def, Workspace* ws, dnnl::algorithm algorithm, float alpha)
    : Operator(def, ws), algorithm_(algorithm), alpha_(alpha) {
  AcceptLayouts();
}

void EltwiseOp::Run() {
  const Tensor& x = Input(0);  // x is any shape, any layout
  Tensor* y = Output(0);       // y has x's shape and layout
  auto desc = DescOf(x);
  dnnl::memory src = AsMemory(x);
  dnnl::memory dst = ResizeForDesc(y, x.shape(), desc);
  if (x.numel() == 0) return;
  if (desc != desc_) {
    desc_ = desc;
    primitive_ = dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(
        CpuEngine(), dnnl::prop_kind::forward_training, algorithm_, desc, desc, alpha_));
  }
  Execute(primitive_, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
}

EltwiseGradientOp::EltwiseGradientOp(const OperatorDef& def, Workspace* ws, dnnl::algorithm algorithm,
                                     float alpha)
    : Operator(def, ws), algorithm_(algorithm), alpha_(alpha), from_output_(ReadsOutput(algorithm)) {
  AcceptLayouts();
}

void EltwiseGradientOp::Run() {
  const Tensor& z = Input(0);   // z is the forward op's Y or X
  const Tensor& dy = Input(1);  // dy has z's shape, any layout
  Tensor* dx = Output(0);       // dx has z's shape and layout
  if (z.shape() != dy.shape())
    FailOperator(def_, fmt::format("dY {} must have {}'s shape {}", ShapeToString(dy.shape()),
                                   from_output_ ? "Y" : "X", ShapeToString(z.shape())));
  auto desc = DescOf(z);
  dnnl::memory saved = AsMemory(z);
  dnnl::memory diff_dst = ReorderIfNeeded(AsMemory(dy), desc, 0);
  dnnl::memory diff_src = ResizeForDesc(dx, z.shape(), desc);
  if (z.numel() == 0) return;
  if (desc != desc_) {
    desc_ = desc;
    dnnl::eltwise_forward::primitive_desc hint(CpuEngine(), dnnl::prop_kind::forward_training, algorithm_,
                                               desc, desc, alpha_);
    primitive_ = dnnl::eltwise_backward(
        dnnl::eltwise_backward::primitive_desc(CpuEngine(), algorithm_, desc, desc, desc, alpha_, hint));
  }
  Execute(primitive_, {{from_output_ ? DNNL_ARG_DST : DNNL_ARG_SRC, saved},
                       {DNNL_ARG_DIFF_DST, diff_dst},
                       {DNNL_ARG_DIFF_SRC, diff_src}});
}

std::string GradientBeforeFusedRelu(const GradientContext& g, std::vector<OperatorDef>* ops) {
  const std::string before_relu = GradientName(g.O(0)) + "_before_relu";
  ops->push_back(MakeOperatorDef("ReluGradient", {g.O(0), g.GO(0)}, {before_relu}));
  return before_relu;
}

std::vector<OperatorDef> EltwiseGradientFromOutput(const GradientContext& g) {
  return {MakeOperatorDef(g.def.type() + "Gradient", {g.O(0), g.GO(0)}, {g.GI(0)}, g.Args())};
}

std::vector<OperatorDef> EltwiseGradientFromInput(const GradientContext& g) {
  return {MakeOperatorDef(g.def.type() + "Gradient", {g.I(0), g.GO(0)}, {g.GI(0)}, g.Args())};
}

void DeclareEltwiseInPlace(OpSchema& schema) {
  schema.Input(0, "X", "any shape")
      .Output(0, "Y", "X's shape; may be X")
      .AllowInplace({{0, 0}})
      .IdentityShape();
}

// (Z, dY) -> dX, where Z is the forward op's `saved` blob ("Y", its output, or "X", its input).
static void DeclareEltwiseGradient(OpSchema& schema, const std::string& saved, const std::string& which) {
  schema.Input(0, saved, "the forward op's " + which)
      .Input(1, "dY", saved + "'s shape")
      .Output(0, "dX", saved + "'s shape; may be dY")
      .AllowInplace({{1, 0}})
      .IdentityShape();
}

void DeclareEltwiseGradientFromOutput(OpSchema& schema) { DeclareEltwiseGradient(schema, "Y", "output"); }

void DeclareEltwiseGradientFromInput(OpSchema& schema) { DeclareEltwiseGradient(schema, "X", "input"); }

}  // namespace lockstep
