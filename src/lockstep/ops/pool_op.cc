// MaxPool and AveragePool over NCHW windows (or the whole plane with `global_pooling`) and their gradients,
// on oneDNN. They work in the layout x comes in (pooling reads blocked formats directly): Y has x's layout
// and dX too. MaxPoolGradient reruns the forward pass to get oneDNN's argmax workspace, so the forward
// operator stays an inference primitive with a single output, as in Caffe2. AveragePoolReluGradient is an
// AveragePoolGradient and the ReluGradient that reads it, in one pass (parallel/fuse_relu.h makes it).
#include <algorithm>
#include <optional>

#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/conv_pool_args.h"
#include "lockstep/ops/dnnl_utils.h"
#include "lockstep/ops/relu_mask.h"

namespace lockstep {
namespace {

using dnnl::memory;

enum class PoolKind { kMax, kAverage };

// One pooling shape and input layout in oneDNN's terms.
struct PoolSetup {
  Shape y_shape;
  memory::desc x;  // x's own layout
  dnnl::algorithm algorithm;
  memory::dims strides, kernel, pad_l, pad_r;

  static memory::dims NoDilation() { return {0, 0}; }

  // Y in x's layout, which is what oneDNN picks for a pooling destination left to it.
  dnnl::pooling_forward::primitive_desc Forward(dnnl::prop_kind kind) const {
    return dnnl::pooling_forward::primitive_desc(
        CpuEngine(), kind, algorithm, x,
        memory::desc(ToDims(y_shape), x.get_data_type(), memory::format_tag::any), strides, kernel,
        NoDilation(), pad_l, pad_r);
  }
};

PoolSetup MakePoolSetup(const OperatorDef& def, PoolKind kind, const ConvPoolArgs& args, const Tensor& x) {
  ConvPoolArgs window = PoolWindow(def, args, x.shape());
  PoolSetup s;
  s.y_shape = PoolOutputShape(def, window, x.shape());
  s.x = DescOf(x);
  // Caffe2's count_include_pad=0 divides each window by its non-padding elements.
  s.algorithm = kind == PoolKind::kMax                  ? dnnl::algorithm::pooling_max
                : IntArg(def, "count_include_pad") != 0 ? dnnl::algorithm::pooling_avg_include_padding
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
  PoolOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws), args_(ParsePoolArgs(def)) {
    AcceptLayouts();
  }

  void Run() override {
    const Tensor& x = Input(0);   // x is (N, C, H, W), any layout
    Tensor* y = Output(0);        // y is (N, C, OH, OW) in x's layout
    if (DescOf(x) != setup_.x) {  // a new shape or layout
      setup_ = MakePoolSetup(def_, kKind, args_, x);
      if (x.numel() > 0) {
        auto pd = setup_.Forward(dnnl::prop_kind::forward_inference);
        primitive_ = dnnl::pooling_forward(pd);
        y_desc_ = pd.dst_desc();
      }
    }
    if (x.numel() == 0) {
      y->Resize(setup_.y_shape, x.dtype());
      return;
    }
    Execute(primitive_,
            {{DNNL_ARG_SRC, AsMemory(x)}, {DNNL_ARG_DST, ResizeForDesc(y, setup_.y_shape, y_desc_)}});
  }

 private:
  const ConvPoolArgs args_;
  PoolSetup setup_;
  dnnl::pooling_forward primitive_;
  memory::desc y_desc_;
};

// (X, Y, dY) -> dX as in Caffe2; Y is not read, since oneDNN needs its own record of where each max was.
template <PoolKind kKind>
class PoolGradientOp : public Operator {
 public:
  PoolGradientOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws), args_(ParsePoolArgs(def)) {
    AcceptLayouts();
  }

  void Run() override {
    const Tensor& x = Input(0);           // x is (N, C, H, W), any layout
    const Tensor& dy = Input(2);          // dy is (N, C, OH, OW), any layout
    Tensor* dx = Output(0);               // dx has x's shape and layout
    if (DescOf(x) != setup_.x) Setup(x);  // a new shape or layout
    if (dy.shape() != setup_.y_shape)
      FailOperator(def_, fmt::format("dY is {} but the pooling output is {}", ShapeToString(dy.shape()),
                                     ShapeToString(setup_.y_shape)));
    if (x.numel() == 0) {
      dx->Resize(x.shape(), x.dtype());
      return;
    }
    memory diff_dst = ReorderIfNeeded(AsMemory(dy), y_desc_, 0);
    memory diff_src = ResizeForDesc(dx, x.shape(), setup_.x);
    if constexpr (kKind == PoolKind::kMax) {
      memory workspace = ScratchMemory(workspace_desc_, 2);
      Execute(forward_, {{DNNL_ARG_SRC, AsMemory(x)},
                         {DNNL_ARG_DST, ScratchMemory(y_desc_, 1)},
                         {DNNL_ARG_WORKSPACE, workspace}});
      Execute(
          backward_,
          {{DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src}, {DNNL_ARG_WORKSPACE, workspace}});
    } else {
      Execute(backward_, {{DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src}});
    }
  }

 private:
  void Setup(const Tensor& x) {
    setup_ = MakePoolSetup(def_, kKind, args_, x);
    if (x.numel() == 0) return;
    auto forward = setup_.Forward(dnnl::prop_kind::forward_training);
    y_desc_ = forward.dst_desc();
    backward_ = dnnl::pooling_backward(dnnl::pooling_backward::primitive_desc(
        CpuEngine(), setup_.algorithm, setup_.x, y_desc_, setup_.strides, setup_.kernel,
        PoolSetup::NoDilation(), setup_.pad_l, setup_.pad_r, forward));
    if constexpr (kKind == PoolKind::kMax) {
      forward_ = dnnl::pooling_forward(forward);
      workspace_desc_ = forward.workspace_desc();
    }
  }

  const ConvPoolArgs args_;
  PoolSetup setup_;
  memory::desc y_desc_;            // the forward output's layout, which dY is brought into
  memory::desc workspace_desc_;    // max only: the argmax workspace
  dnnl::pooling_forward forward_;  // max only: recomputes the argmax workspace
  dnnl::pooling_backward backward_;
};

// Planes of pixels as the fused kernel walks them: `outer` planes of (height, width) pixels, each pixel
// `inner` contiguous values, for X and dX; dY has (out_height, out_width) pixels a plane.
struct Planes {
  int64_t outer, height, width, inner, out_height, out_width;
};

// The 4-D layouts whose planes the kernel walks directly, with their geometry: NCHW, NHWC, and the blocked
// nChw8c and nChw16c when the channels fill their blocks. Others are walked after a reorder to NCHW.
std::optional<Planes> PlanesOf(const memory::desc& desc, int64_t out_height, int64_t out_width,
                               memory::format_tag* tag) {
  using Tag = memory::format_tag;
  const memory::dims dims = desc.get_dims();  // N, C, H, W
  const int64_t n = dims[0], c = dims[1];
  const std::pair<Tag, int64_t> candidates[] = {
      {Tag::nchw, 1}, {Tag::nhwc, c}, {Tag::nChw8c, 8}, {Tag::nChw16c, 16}};
  for (const auto& [candidate, inner] : candidates) {
    if (c % inner != 0 || desc != memory::desc(dims, desc.get_data_type(), candidate)) continue;
    *tag = candidate;
    return Planes{n * c / inner, dims[2], dims[3], inner, out_height, out_width};
  }
  return std::nullopt;
}

// dX = ReluGradient(X, AveragePoolGradient(dY)) over windows that tile the plane (PoolWindowsTile): each
// element of a window gets its dY / (kernel_h * kernel_w) where X > 0, as oneDNN's pooling divides, and the
// elements past the last window (the output size rounds down) get 0.
template <typename T>
void SpreadWherePositive(const T* x, const T* dy, T* dx, const Planes& p, int64_t kernel_h,
                         int64_t kernel_w) {
  const float area = static_cast<float>(kernel_h * kernel_w);
  const int64_t row_values = p.width * p.inner;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t plane = 0; plane < p.outer; ++plane)
    for (int64_t row = 0; row < p.height; ++row) {
      const int64_t at = (plane * p.height + row) * row_values;
      int64_t covered = 0;
      if (row / kernel_h < p.out_height) {
        const T* gradient = dy + (plane * p.out_height + row / kernel_h) * p.out_width * p.inner;
        covered = p.out_width * kernel_w * p.inner;
        for (int64_t column = 0; column < p.out_width * kernel_w; ++column) {
          const T* window = gradient + column / kernel_w * p.inner;
          const int64_t pixel = at + column * p.inner;
          for (int64_t i = 0; i < p.inner; ++i)
            dx[pixel + i] = Narrow<T>(WherePositive(Widen(x[pixel + i]), Widen(window[i]) / area));
        }
      }
      std::fill(dx + at + covered, dx + at + row_values, Narrow<T>(0.f));
    }
}

// (X, dY) -> dX: AveragePoolGradient(X, Y, dY) and then ReluGradient(X, ·), where X is a Relu's output, for
// windows that tile the plane; the bits of the pair, in X's layout (NCHW for a layout PlanesOf lacks).
class AveragePoolReluGradientOp : public Operator {
 public:
  AveragePoolReluGradientOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), args_(ParsePoolArgs(def)) {
    if (!PoolWindowsTile(args_))
      FailOperator(def,
                   "its windows must tile the plane: global_pooling, or a kernel equal to its stride "
                   "without pad");
    AcceptLayouts();
  }

  void Run() override {
    const Tensor& x = Input(0);   // x is (N, C, H, W), any layout
    const Tensor& dy = Input(1);  // dy is (N, C, OH, OW), any layout
    if (x.dtype() != DataType::kFloat && x.dtype() != DataType::kBFloat16)
      FailOperator(def_, fmt::format("X is {}; AveragePoolReluGradient computes in float32 or bfloat16",
                                     DataTypeName(x.dtype())));
    const ConvPoolArgs window = PoolWindow(def_, args_, x.shape());
    const Shape y_shape = PoolOutputShape(def_, window, x.shape());
    if (dy.shape() != y_shape)
      FailOperator(def_, fmt::format("dY is {} but the pooling output is {}", ShapeToString(dy.shape()),
                                     ShapeToString(y_shape)));
    memory::desc desc = DescOf(x);
    memory::format_tag tag;
    std::optional<Planes> planes = PlanesOf(desc, y_shape[2], y_shape[3], &tag);
    memory x_memory = AsMemory(x);
    if (!planes) {
      desc = memory::desc(desc.get_dims(), desc.get_data_type(), memory::format_tag::nchw);
      x_memory = ReorderIfNeeded(x_memory, desc, 1);
      planes = PlanesOf(desc, y_shape[2], y_shape[3], &tag);
    }
    const memory dy_memory =
        ReorderIfNeeded(AsMemory(dy), memory::desc(ToDims(y_shape), desc.get_data_type(), tag), 0);
    const memory dx_memory = ResizeForDesc(Output(0), x.shape(), desc);
    if (x.numel() == 0) return;
    auto run = [&](auto type) {
      using T = decltype(type);
      SpreadWherePositive(static_cast<const T*>(x_memory.get_data_handle()),
                          static_cast<const T*>(dy_memory.get_data_handle()),
                          static_cast<T*>(dx_memory.get_data_handle()), *planes, window.kernel_h,
                          window.kernel_w);
    };
    if (x.dtype() == DataType::kFloat)
      run(float{});
    else
      run(BFloat16{});
  }

 private:
  const ConvPoolArgs args_;
};

std::vector<TensorShape> PoolShape(const OperatorDef& def, const std::vector<TensorShape>& in) {
  return {{PoolOutputShape(def, PoolWindow(def, ParsePoolArgs(def), in[0].dims), in[0].dims), in[0].dtype}};
}

std::vector<TensorShape> PoolGradientShape(const OperatorDef& def, const std::vector<TensorShape>& in) {
  return {in[0]};
}

// What MaxPool and AveragePool share: X -> Y over the window arguments.
void DeclarePool(OpSchema& schema) {
  schema.Input(0, "X", "(N, C, H, W)")
      .Output(0, "Y", "(N, C, OH, OW)")
      .Include(DeclarePoolArgs)
      .ShapeFunction(PoolShape);
}

// What their gradients share: (X, Y, dY) -> dX, with the forward op's arguments.
template <PoolKind kKind>
void DeclarePoolGradient(OpSchema& schema) {
  const std::string forward = kKind == PoolKind::kMax ? "MaxPool" : "AveragePool";
  schema.Input(0, "X", forward + "'s input")
      .Input(1, "Y", forward + "'s output")
      .Input(2, "dY", "Y's shape")
      .Output(0, "dX", "X's shape")
      .ArgsOf(forward)
      .ShapeFunction(PoolGradientShape);
}

// MaxPoolGradient's recomputed Y (slot 1) and oneDNN's argmax workspace (slot 2), both in Y's layout; the
// workspace holds an index into the window per element, one byte when the window has at most 255 elements.
std::vector<size_t> MaxPoolGradientScratch(const OperatorDef& def, const std::vector<TensorShape>& in) {
  const ConvPoolArgs window = PoolWindow(def, ParsePoolArgs(def), in[0].dims);
  const size_t index_bytes = window.kernel_h * window.kernel_w <= 255 ? 1 : 4;
  const size_t elements = static_cast<size_t>(NumElements(in[2].dims));
  return {0, elements * ElementSize(in[2].dtype), elements * index_bytes};
}

GradientMaker PoolGradientMaker(const std::string& gradient_type) {
  return [gradient_type](const GradientContext& g) {
    return std::vector<OperatorDef>{
        MakeOperatorDef(gradient_type, {g.I(0), g.O(0), g.GO(0)}, {g.GI(0)}, g.Args())};
  };
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(MaxPool)
    .SetDoc("The maximum of each window of each channel of NCHW data (or of the whole plane).")
    .Include(DeclarePool);
LOCKSTEP_OPERATOR_SCHEMA(AveragePool)
    .SetDoc("The mean of each window of each channel of NCHW data (or of the whole plane).")
    .Include(DeclarePool)
    .Arg("count_include_pad", ArgType::kInt, 0,
         "1: divide by the whole window; 0: by its elements that are not padding (Caffe2's default)")
    .Range(0, 1);
LOCKSTEP_OPERATOR_SCHEMA(MaxPoolGradient)
    .SetDoc("MaxPool's gradient: dY goes to the maximum of each window.")
    .Include(DeclarePoolGradient<PoolKind::kMax>)
    .ScratchFunction(MaxPoolGradientScratch);
LOCKSTEP_OPERATOR_SCHEMA(AveragePoolGradient)
    .SetDoc("AveragePool's gradient: dY spread evenly over each window.")
    .Include(DeclarePoolGradient<PoolKind::kAverage>);
LOCKSTEP_OPERATOR_SCHEMA(AveragePoolReluGradient)
    .SetDoc(
        "dX = ReluGradient(X, AveragePoolGradient(X, Y, dY)) where X is a Relu's output, in one pass and "
        "with the same bits, for windows that tile the plane (global_pooling, or a kernel equal to its "
        "stride without pad); in X's layout and dtype.")
    .Input(0, "X", "AveragePool's input, a Relu's output: (N, C, H, W), any layout")
    .Input(1, "dY", "the gradient of AveragePool's output, any layout")
    .Output(0, "dX", "X's shape and layout")
    .ArgsOf("AveragePool")
    .ShapeFunction(PoolGradientShape);
LOCKSTEP_REGISTER_CPU_OPERATOR(MaxPool, PoolOp<PoolKind::kMax>);
LOCKSTEP_REGISTER_CPU_OPERATOR(AveragePool, PoolOp<PoolKind::kAverage>);
LOCKSTEP_REGISTER_CPU_OPERATOR(MaxPoolGradient, PoolGradientOp<PoolKind::kMax>);
LOCKSTEP_REGISTER_CPU_OPERATOR(AveragePoolGradient, PoolGradientOp<PoolKind::kAverage>);
LOCKSTEP_REGISTER_CPU_OPERATOR(AveragePoolReluGradient, AveragePoolReluGradientOp);
LOCKSTEP_REGISTER_GRADIENT(MaxPool, PoolGradientMaker("MaxPoolGradient"));
LOCKSTEP_REGISTER_GRADIENT(AveragePool, PoolGradientMaker("AveragePoolGradient"));

}  // namespace lockstep
