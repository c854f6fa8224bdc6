// Caffe2's NHWC2NCHW and NCHW2NHWC: the same 4-D image batch with its channels moved, one oneDNN reorder
// (which sees both as an (N, C, H, W) tensor in two memory formats). Each one's gradient is the other.
#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/dnnl_utils.h"

namespace lockstep {
namespace {

using Tag = dnnl::memory::format_tag;

// X's shape must be 4-D; returns its dims as (N, C, H, W), given whether X is NHWC.
Shape LogicalNchw(const OperatorDef& def, const Shape& x, bool from_nhwc) {
  if (x.size() != 4)
    FailOperator(def, fmt::format("X must be 4-D ({}), got {}", from_nhwc ? "N, H, W, C" : "N, C, H, W",
                                  ShapeToString(x)));
  return from_nhwc ? Shape{x[0], x[3], x[1], x[2]} : x;
}

Shape OutputShape(const OperatorDef& def, const Shape& x, bool from_nhwc) {
  const Shape nchw = LogicalNchw(def, x, from_nhwc);
  return from_nhwc ? nchw : Shape{nchw[0], nchw[2], nchw[3], nchw[1]};
}

template <bool kFromNhwc>
class ChannelMoveOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& x = Input(0);  // x is (N, H, W, C) from NHWC, else (N, C, H, W); float32 or bfloat16
    const dnnl::memory::dims dims = ToDims(LogicalNchw(def_, x.shape(), kFromNhwc));
    Tensor* y = Output(0);  // y holds x's values in the other format
    y->Resize(OutputShape(def_, x.shape(), kFromNhwc), x.dtype());
    if (x.numel() == 0) return;
    const auto type = DnnlType(x.dtype());
    const Tag from = kFromNhwc ? Tag::nhwc : Tag::nchw, to = kFromNhwc ? Tag::nchw : Tag::nhwc;
    ReorderInto(ToMemory(x, dnnl::memory::desc(dims, type, from)),
                ToMemory(*y, dnnl::memory::desc(dims, type, to)));
  }
};

template <bool kFromNhwc>
std::vector<OperatorDef> ChannelMoveGradient(const GradientContext& g) {
  return {MakeOperatorDef(kFromNhwc ? "NCHW2NHWC" : "NHWC2NCHW", {g.GO(0)}, {g.GI(0)})};
}

template <bool kFromNhwc>
std::vector<TensorShape> ChannelMoveShape(const OperatorDef& def, const std::vector<TensorShape>& in) {
  return {{OutputShape(def, in[0].dims, kFromNhwc), in[0].dtype}};
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(NHWC2NCHW)
    .SetDoc("Y = X with its channels moved from the last dim to the second: (N, H, W, C) -> (N, C, H, W).")
    .Input(0, "X", "(N, H, W, C), float32 or bfloat16")
    .Output(0, "Y", "(N, C, H, W)")
    .ShapeFunction(ChannelMoveShape<true>);
LOCKSTEP_OPERATOR_SCHEMA(NCHW2NHWC)
    .SetDoc("Y = X with its channels moved from the second dim to the last: (N, C, H, W) -> (N, H, W, C).")
    .Input(0, "X", "(N, C, H, W), float32 or bfloat16")
    .Output(0, "Y", "(N, H, W, C)")
    .ShapeFunction(ChannelMoveShape<false>);
LOCKSTEP_REGISTER_CPU_OPERATOR(NHWC2NCHW, ChannelMoveOp<true>);
LOCKSTEP_REGISTER_CPU_OPERATOR(NCHW2NHWC, ChannelMoveOp<false>);
LOCKSTEP_REGISTER_GRADIENT(NHWC2NCHW, ChannelMoveGradient<true>);
LOCKSTEP_REGISTER_GRADIENT(NCHW2NHWC, ChannelMoveGradient<false>);

}  // namespace lockstep
