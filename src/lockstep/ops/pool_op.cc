// MaxPool and AveragePool over NCHW windows (or the whole plane with `global_pooling`) and their gradients,
// on oneDNN. MaxPoolGradient reruns the forward pass to get oneDNN's argmax workspace, so the forward
// operator stays a plain inference primitive with a single output, as in Caffe2.
#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/conv_pool_args.h"
#include "lockstep/ops/dnnl_utils.h"

namespace lockstep {
namespace {

using dnnl::memory;

enum class PoolKind { kMax, kAverage };

[[noreturn]] void Fail(const OperatorDef& def, const std::string& what) {
  throw InvalidInput(fmt::format("{}: {}", DescribeOperator(def), what));
}

// The window arguments, with the checks that only pooling needs.
ConvPoolArgs ParsePoolArgs(const OperatorDef& def) {
  ConvPoolArgs args = ParseConvPoolArgs(def);
  if (args.dilation_h != 1 || args.dilation_w != 1) Fail(def, "pooling does not support dilation");
  if (args.global_pooling) {
    if (args.has_kernel() || args.stride_h != 1 || args.stride_w != 1 || args.pad_t || args.pad_l ||
        args.pad_b || args.pad_r)
      Fail(def, "global_pooling covers the whole plane: drop kernel, stride and pad");
    return args;
  }
  if (!args.has_kernel()) Fail(def, "needs 'kernel' (or kernel_h/kernel_w, kernels) or global_pooling=1");
  // A window that lies wholly in the padding would have nothing to pool.
  if (args.pad_t >= args.kernel_h || args.pad_b >= args.kernel_h || args.pad_l >= args.kernel_w ||
      args.pad_r >= args.kernel_w)
    Fail(def, fmt::format("pads (t {}, l {}, b {}, r {}) must be smaller than the {}x{} kernel", args.pad_t,
                          args.pad_l, args.pad_b, args.pad_r, args.kernel_h, args.kernel_w));
  return args;
}

// The window over an x of (N, C, H, W): global pooling takes the whole (H, W).
ConvPoolArgs PoolWindow(const OperatorDef& def, const ConvPoolArgs& args, const Shape& x) {
  if (x.size() != 4) Fail(def, fmt::format("input must be (N, C, H, W), got {}", ShapeToString(x)));
  ConvPoolArgs window = args;
  if (args.global_pooling) {
    window.kernel_h = x[2];
    window.kernel_w = x[3];
  }
  return window;
}

// Y's shape (N, C, OH, OW) for an x of (N, C, H, W).
Shape PoolOutputShape(const OperatorDef& def, const ConvPoolArgs& window, const Shape& x) {
  auto [out_h, out_w] = ConvPoolOutputSize(def, window, x[2], x[3]);
  return {x[0], x[1], out_h, out_w};
}

// One pooling shape in oneDNN's terms; both tensors stay in the user's plain NCHW layout.
struct PoolSetup {
  Shape y_shape;
  memory::desc x, y;
  dnnl::algorithm algorithm;
  memory::dims strides, kernel, pad_l, pad_r;

  dnnl::pooling_forward::desc forward_desc(dnnl::prop_kind kind) const {
    return dnnl::pooling_forward::desc(kind, algorithm, x, y, strides, kernel, pad_l, pad_r);
  }
};

PoolSetup MakePoolSetup(const OperatorDef& def, PoolKind kind, const ConvPoolArgs& args, const Shape& x) {
  ConvPoolArgs window = PoolWindow(def, args, x);
  PoolSetup s;
  s.y_shape = PoolOutputShape(def, window, x);
  s.x = PlainDesc(x);
  s.y = PlainDesc(s.y_shape);
  // Caffe2's count_include_pad=0 divides each window by its non-padding elements.
  bool include_pad = GetIntArgument(def, "count_include_pad", 0) != 0;
  s.algorithm = kind == PoolKind::kMax ? dnnl::algorithm::pooling_max
                : include_pad          ? dnnl::algorithm::pooling_avg_include_padding
                                       : dnnl::algorithm::pooling_avg_exclude_padding;
  s.strides = {window.stride_h, window.stride_w};
  s.kernel = {window.kernel_h, window.kernel_w};
  s.pad_l = {window.pad_t, window.pad_l};
  s.pad_r = {window.pad_b, window.pad_r};
  return s;
}

template <PoolKind kKind>
class PoolOp : public Operator {
 public:
  PoolOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws), args_(ParsePoolArgs(def)) {}

  void Run() override {
    const Tensor& x = Input(0);  // x is (N, C, H, W)
    Tensor* y = Output(0);       // y is (N, C, OH, OW)
    if (x.shape() != x_shape_) {
      setup_ = MakePoolSetup(def_, kKind, args_, x.shape());
      x_shape_ = x.shape();
      if (x.numel() > 0)
        primitive_ = dnnl::pooling_forward(dnnl::pooling_forward::primitive_desc(
            setup_.forward_desc(dnnl::prop_kind::forward_inference), CpuEngine()));
    }
    y->Resize(setup_.y_shape);
    if (x.numel() == 0) return;
    Execute(primitive_, {{DNNL_ARG_SRC, ToMemory(x, setup_.x)}, {DNNL_ARG_DST, ToMemory(*y, setup_.y)}});
  }

 private:
  const ConvPoolArgs args_;
  Shape x_shape_;
  PoolSetup setup_;
  dnnl::pooling_forward primitive_;
};

// (X, Y, dY) -> dX as in Caffe2; Y is not read, since oneDNN needs its own record of where each max was.
template <PoolKind kKind>
class PoolGradientOp : public Operator {
 public:
  PoolGradientOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws), args_(ParsePoolArgs(def)) {}

  void Run() override {
    const Tensor& x = Input(0);   // x is (N, C, H, W)
    const Tensor& dy = Input(2);  // dy is (N, C, OH, OW)
    Tensor* dx = Output(0);       // dx has x's shape
    if (x.shape() != x_shape_) Setup(x.shape());
    if (dy.shape() != setup_.y_shape)
      Fail(def_, fmt::format("dY is {} but the pooling output is {}", ShapeToString(dy.shape()),
                             ShapeToString(setup_.y_shape)));
    dx->Resize(x.shape());
    if (x.numel() == 0) return;
    if constexpr (kKind == PoolKind::kMax) {
      Execute(forward_, {{DNNL_ARG_SRC, ToMemory(x, setup_.x)},
                         {DNNL_ARG_DST, y_scratch_},
                         {DNNL_ARG_WORKSPACE, workspace_}});
      Execute(backward_, {{DNNL_ARG_DIFF_DST, ToMemory(dy, setup_.y)},
                          {DNNL_ARG_DIFF_SRC, ToMemory(*dx, setup_.x)},
                          {DNNL_ARG_WORKSPACE, workspace_}});
    } else {
      Execute(backward_,
              {{DNNL_ARG_DIFF_DST, ToMemory(dy, setup_.y)}, {DNNL_ARG_DIFF_SRC, ToMemory(*dx, setup_.x)}});
    }
  }

 private:
  void Setup(const Shape& x) {
    setup_ = MakePoolSetup(def_, kKind, args_, x);
    x_shape_ = x;
    if (NumElements(x) == 0) return;
    dnnl::pooling_forward::primitive_desc forward(setup_.forward_desc(dnnl::prop_kind::forward_training),
                                                  CpuEngine());
    dnnl::pooling_backward::desc desc(setup_.algorithm, setup_.x, setup_.y, setup_.strides, setup_.kernel,
                                      setup_.pad_l, setup_.pad_r);
    backward_ = dnnl::pooling_backward(dnnl::pooling_backward::primitive_desc(desc, CpuEngine(), forward));
    if constexpr (kKind == PoolKind::kMax) {
      forward_ = dnnl::pooling_forward(forward);
      y_scratch_ = memory(setup_.y, CpuEngine());
      workspace_ = memory(forward.workspace_desc(), CpuEngine());
    }
  }

  const ConvPoolArgs args_;
  Shape x_shape_;
  PoolSetup setup_;
  dnnl::pooling_forward forward_;  // max only: recomputes the argmax workspace
  dnnl::pooling_backward backward_;
  memory y_scratch_, workspace_;
};

std::vector<TensorShape> PoolShape(const OperatorDef& def, const std::vector<TensorShape>& in) {
  return {{PoolOutputShape(def, PoolWindow(def, ParsePoolArgs(def), in[0].dims), in[0].dims)}};
}

std::vector<TensorShape> PoolGradientShape(const OperatorDef& def, const std::vector<TensorShape>& in) {
  return {in[0]};
}

GradientMaker PoolGradientMaker(const std::string& gradient_type) {
  return [gradient_type](const GradientContext& g) {
    return std::vector<OperatorDef>{
        MakeOperatorDef(gradient_type, {g.I(0), g.O(0), g.GO(0)}, {g.GI(0)}, g.Args())};
  };
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(MaxPool).NumInputs(1).NumOutputs(1).ShapeFunction(PoolShape);
LOCKSTEP_OPERATOR_SCHEMA(AveragePool).NumInputs(1).NumOutputs(1).ShapeFunction(PoolShape);
LOCKSTEP_OPERATOR_SCHEMA(MaxPoolGradient).NumInputs(3).NumOutputs(1).ShapeFunction(PoolGradientShape);
LOCKSTEP_OPERATOR_SCHEMA(AveragePoolGradient).NumInputs(3).NumOutputs(1).ShapeFunction(PoolGradientShape);
LOCKSTEP_REGISTER_CPU_OPERATOR(MaxPool, PoolOp<PoolKind::kMax>);
LOCKSTEP_REGISTER_CPU_OPERATOR(AveragePool, PoolOp<PoolKind::kAverage>);
LOCKSTEP_REGISTER_CPU_OPERATOR(MaxPoolGradient, PoolGradientOp<PoolKind::kMax>);
LOCKSTEP_REGISTER_CPU_OPERATOR(AveragePoolGradient, PoolGradientOp<PoolKind::kAverage>);
LOCKSTEP_REGISTER_GRADIENT(MaxPool, PoolGradientMaker("MaxPoolGradient"));
LOCKSTEP_REGISTER_GRADIENT(AveragePool, PoolGradientMaker("AveragePoolGradient"));

}  // namespace lockstep
