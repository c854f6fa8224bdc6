// Conv: 2-D convolution with groups, stride, padding and dilation, and ConvGradient(X, filter, dY) ->
// [dfilter], [dbias], [dX] (see weight_gradient.h), on oneDNN. Primitives are built once per shape with
// their layouts left to oneDNN, which picks its fast blocked formats (NHWC where the channels do not fill its
// blocks); activations and their gradients stay in those formats between operators (an input is reordered
// only when it arrives in another), while the filter, bias and their gradients stay plain, in their own
// dtypes, and are reordered into the primitive's formats each run.
#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/conv_pool_args.h"
#include "lockstep/ops/dnnl_utils.h"
#include "lockstep/ops/eltwise_op.h"
#include "lockstep/ops/weight_gradient.h"

namespace lockstep {
namespace {

using dnnl::memory;

// One convolution shape in oneDNN's terms: the plain layouts of the parameters, the geometry, and the
// forward primitive descriptor (the gradient primitives take it as a hint). The convolution computes in X's
// dtype (float32, or bfloat16 with float32 accumulation); the parameters come in their own dtypes and are
// converted where they differ.
struct ConvSetup {
  memory::desc filter, bias;  // plain; a grouped filter is (group, M/group, C/group, kh, kw)
  memory::desc x_any, filter_any, y_any;
  memory::desc dfilter_any;  // in the filter's own dtype: a float32 filter gets its gradient unrounded
  memory::dims strides, dilates, pad_l, pad_r;
  dnnl::convolution_forward::primitive_desc forward;
};

// Channels that do not fill oneDNN's blocks are padded in its blocked layouts (LeNet's 6 channels take the
// room and the time of 16 with AVX-512): such a convolution works in NHWC, which pads nothing, and so do the
// operators after it, which keep its layout. An image (at most 4 channels) is left to oneDNN, which has
// kernels that read it plain.
bool WorksInNhwc(int64_t x_channels, int64_t y_channels) {
  const int64_t block = BlockedLayoutChannels();
  return y_channels % block != 0 || (x_channels > 4 && x_channels % block != 0);
}

// With `relu`, the forward primitive applies max(Y, 0) in the same pass (a post-op).
ConvSetup MakeConvSetup(const ConvPoolArgs& args, int64_t group, const TensorShape& x,
                        const TensorShape& filter, const Shape& y, DataType bias_type, bool relu = false) {
  ConvSetup s;
  const Shape& w = filter.dims;
  const Shape grouped = group == 1 ? w : Shape{group, w[0] / group, w[1], w[2], w[3]};
  s.bias = PlainDesc({w[0]}, bias_type == DataType::kUndefined ? DataType::kFloat : bias_type);
  s.filter = PlainDesc(grouped, filter.dtype);
  s.x_any = AnyLayout(PlainDesc(x.dims, x.dtype));
  s.filter_any = AnyLayout(PlainDesc(grouped, x.dtype));
  s.dfilter_any = AnyLayout(PlainDesc(grouped, filter.dtype));
  s.y_any = AnyLayout(PlainDesc(y, x.dtype));
  if (WorksInNhwc(x.dims[1], y[1])) {
    s.x_any = memory::desc(ToDims(x.dims), DnnlType(x.dtype), memory::format_tag::nhwc);
    s.y_any = memory::desc(ToDims(y), DnnlType(x.dtype), memory::format_tag::nhwc);
  }
  s.strides = {args.stride_h, args.stride_w};
  s.dilates = {args.dilation_h - 1, args.dilation_w - 1};  // oneDNN counts the gaps between taps
  s.pad_l = {args.pad_t, args.pad_l};
  s.pad_r = {args.pad_b, args.pad_r};
  auto kind = dnnl::prop_kind::forward_training;
  auto algorithm = dnnl::algorithm::convolution_direct;
  const bool with_bias = bias_type != DataType::kUndefined;
  const dnnl::primitive_attr attr = ReluPostOp(relu);
  s.forward = with_bias ? dnnl::convolution_forward::primitive_desc(CpuEngine(), kind, algorithm, s.x_any,
                                                                    s.filter_any, s.bias, s.y_any, s.strides,
                                                                    s.dilates, s.pad_l, s.pad_r, attr)
                        : dnnl::convolution_forward::primitive_desc(CpuEngine(), kind, algorithm, s.x_any,
                                                                    s.filter_any, s.y_any, s.strides,
                                                                    s.dilates, s.pad_l, s.pad_r, attr);
  return s;
}

// The gradient's primitive descriptors for one shape: the weights pass when dfilter or dbias is wanted, the
// data pass when dX is (each left empty otherwise).
struct ConvGradientPlan {
  dnnl::convolution_backward_weights::primitive_desc weights;
  dnnl::convolution_backward_data::primitive_desc data;
};

ConvGradientPlan MakeConvGradientPlan(const ConvSetup& s, const WeightGradientOutputs& wants) {
  ConvGradientPlan plan;
  auto algorithm = dnnl::algorithm::convolution_direct;
  if (wants.dweight || wants.dbias) {
    using WeightsDesc = dnnl::convolution_backward_weights::primitive_desc;
    plan.weights = wants.dbias ? WeightsDesc(CpuEngine(), algorithm, s.x_any, s.dfilter_any, s.bias, s.y_any,
                                             s.strides, s.dilates, s.pad_l, s.pad_r, s.forward)
                               : WeightsDesc(CpuEngine(), algorithm, s.x_any, s.dfilter_any, s.y_any,
                                             s.strides, s.dilates, s.pad_l, s.pad_r, s.forward);
  }
  if (wants.dx) {
    // dY and dX in the layouts of the forward pass's Y and X where oneDNN has a kernel for them: a kernel
    // of its own choice (NHWC for strided ones) would have its neighbours reorder both, in time and memory.
    using DataDesc = dnnl::convolution_backward_data::primitive_desc;
    auto make = [&](const memory::desc& dx, const memory::desc& dy) {
      return DataDesc(CpuEngine(), algorithm, dx, s.filter_any, dy, s.strides, s.dilates, s.pad_l, s.pad_r,
                      s.forward);
    };
    try {
      plan.data = make(s.forward.src_desc(), s.forward.dst_desc());
    } catch (const dnnl::error&) {
      plan.data = make(s.x_any, s.y_any);
    }
  }
  return plan;
}

class ConvOp : public Operator {
 public:
  ConvOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws),
        args_(ParseConvPoolArgs(def)),
        group_(IntArg("group")),
        relu_(IntArg("relu") != 0) {
    AcceptLayouts();
  }

  void Run() override {
    const Tensor& x = Input(0);                                       // x is (N, C, H, W), any layout
    const Tensor& filter = PlainParameter(Input(1), &filter_plain_);  // filter is (M, C/group, kh, kw)
    const Tensor* bias = InputSize() == 3 ? &PlainParameter(Input(2), &bias_plain_) : nullptr;  // bias is (M)
    Tensor* y = Output(0);  // y is (N, M, OH, OW) in the primitive's layout, in x's dtype
    if (!signature_.Matches({&x, &filter, bias})) Setup(x, filter, bias);
    if (NumElements(y_shape_) == 0) {
      y->Resize(y_shape_, x.dtype());
      return;
    }
    memory dst = ResizeForDesc(y, y_shape_, setup_.forward.dst_desc());
    memory src = ReorderIfNeeded(AsMemory(x), setup_.forward.src_desc(), 0);
    memory weights = ReorderIfNeeded(ToMemory(filter, setup_.filter), setup_.forward.weights_desc(), 1);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}};
    if (bias) args[DNNL_ARG_BIAS] = ToMemory(*bias, setup_.bias);
    Execute(primitive_, args);
  }

 private:
  void Setup(const Tensor& x, const Tensor& filter, const Tensor* bias) {
    y_shape_ =
        ConvOutputShape(def_, args_, group_, x.shape(), filter.shape(), bias ? &bias->shape() : nullptr);
    signature_.Record({&x, &filter, bias});
    if (NumElements(y_shape_) == 0) return;
    setup_ = MakeConvSetup(args_, group_, {x.shape(), x.dtype()}, {filter.shape(), filter.dtype()}, y_shape_,
                           bias ? bias->dtype() : DataType::kUndefined, relu_);
    primitive_ = dnnl::convolution_forward(setup_.forward);
  }

  const ConvPoolArgs args_;
  const int64_t group_;
  const bool relu_;
  Signature signature_;
  Shape y_shape_;
  ConvSetup setup_;
  dnnl::convolution_forward primitive_;
  Tensor filter_plain_, bias_plain_;
};

class ConvGradientOp : public Operator {
 public:
  ConvGradientOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws),
        args_(ParseConvPoolArgs(def)),
        group_(IntArg("group")),
        wants_(ParseWeightGradientOutputs(def)) {
    AcceptLayouts();
  }

  void Run() override {
    const Tensor& x = Input(0);                                       // x is (N, C, H, W), any layout
    const Tensor& filter = PlainParameter(Input(1), &filter_plain_);  // filter is (M, C/group, kh, kw)
    const Tensor& dy = Input(2);                                      // dy is (N, M, OH, OW), any layout
    // dfilter has filter's shape and dtype, plain; dbias is (M), float32; dx has x's shape and dtype, in the
    // primitive's layout
    auto [dfilter, dbias, dx] = SelectWeightGradients(wants_, [this](int i) { return Output(i); });
    if (!signature_.Matches({&x, &filter, &dy})) Setup(x, filter, dy);
    if (dfilter) dfilter->Resize(filter.shape(), filter.dtype());
    if (dbias) dbias->Resize({filter.dim(0)});
    if (dy.numel() == 0) {  // an empty batch, or no filters, contributes nothing
      if (dfilter) dfilter->Zero();
      if (dbias) dbias->Zero();
      if (dx) {
        dx->Resize(x.shape(), x.dtype());
        dx->Zero();
      }
      return;
    }

    memory dy_user = AsMemory(dy);
    memory dy_for_weights;
    if (weights_primitive_) {
      memory src = ReorderIfNeeded(AsMemory(x), weights_src_desc_, 0);
      dy_for_weights = ReorderIfNeeded(dy_user, weights_dy_desc_, 1);
      memory dfilter_user = dfilter ? ToMemory(*dfilter, setup_.filter) : memory();
      memory diff_weights = dfilter_in_plain_ ? dfilter_user : ScratchMemory(weights_dfilter_desc_, 2);
      std::unordered_map<int, memory> args{
          {DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, dy_for_weights}, {DNNL_ARG_DIFF_WEIGHTS, diff_weights}};
      if (dbias) args[DNNL_ARG_DIFF_BIAS] = ToMemory(*dbias, setup_.bias);
      Execute(weights_primitive_, args);
      if (dfilter && !dfilter_in_plain_) ReorderInto(diff_weights, dfilter_user);
    }
    if (data_primitive_) {
      memory dy_for_data = weights_primitive_ && data_dy_desc_ == weights_dy_desc_
                               ? dy_for_weights
                               : ReorderIfNeeded(dy_user, data_dy_desc_, 3);
      memory weights = ReorderIfNeeded(ToMemory(filter, setup_.filter), data_weights_desc_, 4);
      memory diff_src = ResizeForDesc(dx, x.shape(), dx_desc_);
      Execute(data_primitive_,
              {{DNNL_ARG_DIFF_DST, dy_for_data}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DIFF_SRC, diff_src}});
    }
  }

 private:
  void Setup(const Tensor& x, const Tensor& filter, const Tensor& dy) {
    Shape y = ConvOutputShape(def_, args_, group_, x.shape(), filter.shape(), nullptr);
    if (dy.shape() != y)
      FailOperator(def_, fmt::format("dY is {} but the convolution output is {}", ShapeToString(dy.shape()),
                                     ShapeToString(y)));
    signature_.Record({&x, &filter, &dy});
    if (dy.numel() == 0) return;
    setup_ = MakeConvSetup(args_, group_, {x.shape(), x.dtype()}, {filter.shape(), filter.dtype()}, y,
                           wants_.dbias ? DataType::kFloat : DataType::kUndefined);
    const ConvGradientPlan plan = MakeConvGradientPlan(setup_, wants_);
    if (plan.weights) {
      const auto& pd = plan.weights;
      weights_primitive_ = dnnl::convolution_backward_weights(pd);
      weights_src_desc_ = pd.src_desc();
      weights_dy_desc_ = pd.diff_dst_desc();
      // The primitive writes dfilter directly when it works in the plain layout; without a dfilter output it
      // still needs somewhere to write it.
      weights_dfilter_desc_ = pd.diff_weights_desc();
      dfilter_in_plain_ = wants_.dweight && weights_dfilter_desc_ == setup_.filter;
    }
    if (plan.data) {
      const auto& pd = plan.data;
      data_primitive_ = dnnl::convolution_backward_data(pd);
      data_dy_desc_ = pd.diff_dst_desc();
      data_weights_desc_ = pd.weights_desc();
      dx_desc_ = pd.diff_src_desc();
    }
  }

  const ConvPoolArgs args_;
  const int64_t group_;
  const WeightGradientOutputs wants_;
  Signature signature_;
  ConvSetup setup_;
  dnnl::convolution_backward_weights weights_primitive_;
  dnnl::convolution_backward_data data_primitive_;
  memory::desc weights_src_desc_, weights_dy_desc_, weights_dfilter_desc_, data_dy_desc_, data_weights_desc_,
      dx_desc_;
  bool dfilter_in_plain_ = false;  // the weights primitive writes dfilter itself
  Tensor filter_plain_;
};

std::vector<TensorShape> ConvShape(const OperatorDef& def, const std::vector<TensorShape>& in) {
  const Shape* bias = in.size() == 3 ? &in[2].dims : nullptr;
  return {{ConvOutputShape(def, ParseConvPoolArgs(def), IntArg(def, "group"), in[0].dims, in[1].dims, bias),
           in[0].dtype}};
}

// The scratch every run takes, from the primitives the op builds for these shapes (an input that comes in
// another layout than the kernel's is reordered too, which depends on its neighbours): the forward pass's
// filter in the kernel's layout (slot 1).
std::vector<size_t> ConvScratch(const OperatorDef& def, const std::vector<TensorShape>& in) {
  const Shape y = ConvShape(def, in)[0].dims;
  if (NumElements(y) == 0) return {};
  const ConvSetup s = MakeConvSetup(ParseConvPoolArgs(def), IntArg(def, "group"), in[0], in[1], y,
                                    in.size() == 3 ? in[2].dtype : DataType::kUndefined);
  const memory::desc weights = s.forward.weights_desc();
  return {0, weights == s.filter ? 0 : weights.get_size()};
}

// The weights pass's dfilter when it is not written in place (slot 2), and the data pass's filter in the
// kernel's layout (slot 4).
std::vector<size_t> ConvGradientScratch(const OperatorDef& def, const std::vector<TensorShape>& in) {
  const ConvPoolArgs args = ParseConvPoolArgs(def);
  const int64_t group = IntArg(def, "group");
  const Shape y = ConvOutputShape(def, args, group, in[0].dims, in[1].dims, nullptr);
  if (NumElements(y) == 0) return {};
  const WeightGradientOutputs wants = ParseWeightGradientOutputs(def);
  const ConvSetup s =
      MakeConvSetup(args, group, in[0], in[1], y, wants.dbias ? DataType::kFloat : DataType::kUndefined);
  const ConvGradientPlan plan = MakeConvGradientPlan(s, wants);
  std::vector<size_t> slots(5, 0);
  if (plan.weights && !(wants.dweight && plan.weights.diff_weights_desc() == s.filter))
    slots[2] = plan.weights.diff_weights_desc().get_size();
  if (plan.data && plan.data.weights_desc() != s.filter) slots[4] = plan.data.weights_desc().get_size();
  return slots;
}

// With relu=1, ReLU's gradient first, from Y, and the convolution's from what it gives.
std::vector<OperatorDef> ConvGradient(const GradientContext& g) {
  if (IntArg(g.def, "relu") == 0) return {MakeWeightGradientOp("ConvGradient", g)};
  std::vector<OperatorDef> ops;
  GradientContext convolution = g;
  convolution.output_grads[0] = GradientBeforeFusedRelu(g, &ops);
  ops.push_back(MakeWeightGradientOp("ConvGradient", convolution));
  SetArgument(&ops.back(), Arg("relu", 0));
  return ops;
}

}  // namespace

constexpr unsigned kConvGpuOptions = kCudnnWorkspace | kTensorCore | kFloat16Compute;
LOCKSTEP_OPERATOR_SCHEMA(Conv)
    .SetDoc(
        "2-D convolution of NCHW data with groups, stride, padding and dilation, as Caffe2's Conv: oneDNN on "
        "CPUs, cuDNN on CUDA devices.")
    .Input(0, "X", "(N, C, H, W)")
    .Input(1, "filter", "(M, C / group, kh, kw)")
    .OptionalInput(2, "bias", "(M)")
    .Output(0, "Y", "(N, M, OH, OW)")
    .Include(DeclareConvArgs)
    .Arg("relu", ArgType::kInt, 0, "1: Y = max(convolution, 0) in the same pass (CPU)")
    .Range(0, 1)
    .ShapeFunction(ConvShape)
    .CostFunction(WeightedLayerCost)
    .ScratchFunction(ConvScratch)
    .CpuConvertsInputs({1, 2})
    .TakesGpuOptions(kConvGpuOptions);
LOCKSTEP_OPERATOR_SCHEMA(ConvGradient)
    .Include(DeclareWeightGradient("Conv", "filter", "bias"))
    .ScratchFunction(ConvGradientScratch)
    .TakesGpuOptions(kConvGpuOptions);
LOCKSTEP_REGISTER_CPU_OPERATOR(Conv, ConvOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(ConvGradient, ConvGradientOp);
LOCKSTEP_REGISTER_GRADIENT(Conv, ConvGradient);

}  // namespace lockstep
