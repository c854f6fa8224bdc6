// SpatialBN: batch normalization over the channel axis of NCHW (or NC) data, with oneDNN's
// batch_normalization. Training normalizes with the batch statistics and folds them into the running ones;
// test mode uses the latter. X, Y, dY and dX keep X's layout (blocked nChw16c is several times faster than
// plain NCHW); the per-channel tensors are plain. With arg relu=1 the op computes relu(BN(X)) in the same
// pass: training then also writes oneDNN's ReLU mask, which the gradient reads instead of a separate Relu's
// output and gradient passes over the whole activation. With 7 inputs (data parallelism with combined
// statistics) training normalizes with the statistics of the whole batch across devices instead.
#include "lockstep/ops/spatial_bn_op.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/batch_norm_channels.h"
#include "lockstep/ops/dnnl_utils.h"

namespace lockstep {

int SpatialBNNumOutputs(const OperatorDef& def) {
  bool is_test = IntArg(def, "is_test") != 0;
  bool relu = IntArg(def, "relu") != 0;
  int expected = is_test ? 1 : relu ? 6 : 5;
  if (def.output_size() != expected)
    FailOperator(def, fmt::format("takes {} outputs with is_test={} and relu={}, got {}", expected,
                                  is_test ? 1 : 0, relu ? 1 : 0, def.output_size()));
  return expected;
}

bool CombinesStatistics(const OperatorDef& def) {
  if (def.input_size() == 5) return false;
  if (def.input_size() != 7)
    FailOperator(def, fmt::format("takes 5 inputs (X, scale, bias, running_mean, running_var), or 7 adding "
                                  "the sums of X and X^2, got {}",
                                  def.input_size()));
  if (IntArg(def, "is_test") != 0)
    FailOperator(def, "combined statistics (7 inputs) are for training; test mode takes 5 inputs");
  if (IntArg(def, "relu") != 0)
    FailOperator(def,
                 "relu=1 is not available with combined statistics (7 inputs); follow SpatialBN with Relu");
  return true;
}

std::array<int, 3> SpatialBNGradientOutputs(const OperatorDef& def) {
  bool is_test = IntArg(def, "is_test") != 0;
  bool relu = IntArg(def, "relu") != 0;
  if (relu && is_test) FailOperator(def, "relu=1 needs the training forward pass's mask; is_test=1 has none");
  if (def.input_size() != (relu ? 6 : 5))
    FailOperator(def,
                 fmt::format("takes {} inputs with relu={} (X, scale, dY, saved_mean, saved_var{}), got {}",
                             relu ? 6 : 5, relu ? 1 : 0, relu ? ", mask" : "", def.input_size()));
  auto gradients = IntsArg(def, "gradients");
  if (gradients.size() != static_cast<size_t>(def.output_size()))
    FailOperator(def, fmt::format("arg gradients lists {} outputs but the op has {}", gradients.size(),
                                  def.output_size()));
  std::array<int, 3> output_of{-1, -1, -1};
  for (size_t i = 0; i < gradients.size(); ++i) {
    if (gradients[i] < 0 || gradients[i] > 2 || (i > 0 && gradients[i] <= gradients[i - 1]))
      FailOperator(def, "arg gradients must be increasing indices among 0 (dX), 1 (dscale), 2 (dbias)");
    output_of[gradients[i]] = static_cast<int>(i);
  }
  return output_of;
}

int64_t SpatialBNGradientChannels(const OperatorDef& def, const Shape& x, const Shape& scale,
                                  const Shape& saved_mean, const Shape& saved_var, const Shape& dy) {
  int64_t channels = ChannelCount(def, x, {{1, &scale}, {3, &saved_mean}, {4, &saved_var}});
  if (dy != x)
    FailOperator(def, fmt::format("dY {} must have X's shape {}", ShapeToString(dy), ShapeToString(x)));
  return channels;
}

namespace {

// global_stats: normalize with given statistics (test mode, or combined ones) instead of the batch's.
dnnl::normalization_flags Flags(bool global_stats, bool relu) {
  auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  if (global_stats) flags |= dnnl::normalization_flags::use_global_stats;
  if (relu) flags |= dnnl::normalization_flags::fuse_norm_relu;
  return flags;
}

// training: the form that writes the ReLU mask (relu) for the gradient, also with given statistics.
dnnl::batch_normalization_forward::primitive_desc ForwardDesc(const dnnl::memory::desc& x, float epsilon,
                                                              bool global_stats, bool relu, bool training) {
  auto kind = training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  return dnnl::batch_normalization_forward::primitive_desc(CpuEngine(), kind, x, x, epsilon,
                                                           Flags(global_stats, relu));
}

// The ReLU mask. On CUDA devices one byte per element of X (ops/cuda/spatial_bn_op.cu). On the CPU opaque
// bytes whose count depends on X's layout (bits per element and channel padding vary with the implementation
// oneDNN picks); inference reports the count for plain X.
TensorShape MaskShape(const OperatorDef& def, const TensorShape& x, bool global_stats) {
  if (DeviceOf(def).type == DeviceType::kCuda) return {{NumElements(x.dims)}, DataType::kUInt8};
  auto forward = ForwardDesc(PlainDesc(x.dims, x.dtype), FloatArg(def, "epsilon"), global_stats, true, true);
  return {{static_cast<int64_t>(forward.workspace_desc().get_size())}, DataType::kUInt8};
}

std::vector<TensorShape> SpatialBNShapes(const OperatorDef& def, const std::vector<TensorShape>& in) {
  bool combined = CombinesStatistics(def);
  int num_outputs = SpatialBNNumOutputs(def);
  std::vector<std::pair<int, const Shape*>> per_channel{
      {1, &in[1].dims}, {2, &in[2].dims}, {3, &in[3].dims}, {4, &in[4].dims}};
  if (combined) per_channel.insert(per_channel.end(), {{5, &in[5].dims}, {6, &in[6].dims}});
  int64_t channels = ChannelCount(def, in[0].dims, per_channel);
  std::vector<TensorShape> out{in[0]};
  for (int i = 1; i < std::min(num_outputs, 5); ++i) out.push_back({{channels}, DataType::kFloat});
  if (num_outputs == 6) {
    out.push_back(MaskShape(def, in[0], /*global_stats=*/false));
  }
  return out;
}

// (X, scale, bias, saved_mean, saved_var) -> Y, relu_mask.
std::vector<TensorShape> SpatialBNReluAgainShapes(const OperatorDef& def,
                                                  const std::vector<TensorShape>& in) {
  ChannelCount(def, in[0].dims, {{1, &in[1].dims}, {2, &in[2].dims}, {3, &in[3].dims}, {4, &in[4].dims}});
  return {in[0], MaskShape(def, in[0], /*global_stats=*/true)};
}

// tensor is (C), plain: oneDNN never blocks 1-D tensors.
dnnl::memory ChannelMemory(const Tensor& tensor) {
  LOCKSTEP_ENFORCE(tensor.is_plain(), "SpatialBN per-channel tensors must be plain, got one of shape {}",
                   ShapeToString(tensor.shape()));
  return ToMemory(tensor);
}

class SpatialBNOp : public Operator {
 public:
  SpatialBNOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws),
        is_test_(IntArg("is_test") != 0),
        epsilon_(FloatArg("epsilon")),
        momentum_(FloatArg("momentum")),
        relu_(IntArg("relu") != 0),
        combined_(CombinesStatistics(def)),
        num_batches_(IntArg("num_batches")) {
    AcceptLayouts();
    SpatialBNNumOutputs(def);
  }

  void Run() override {
    const Tensor& x = Input(0);             // x is (N, C, H, W) or (N, C)
    const Tensor& scale = Input(1);         // scale is (C)
    const Tensor& bias = Input(2);          // bias is (C)
    const Tensor& running_mean = Input(3);  // running_mean is (C); training updates it in place (output 1)
    const Tensor& running_var = Input(4);   // running_var is (C); training updates it in place (output 2)
    std::vector<std::pair<int, const Shape*>> per_channel{
        {1, &scale.shape()}, {2, &bias.shape()}, {3, &running_mean.shape()}, {4, &running_var.shape()}};
    // sum and sum_sq are (C): X and X^2 summed over the batches of all num_batches replicas
    const Tensor* sum = combined_ ? &Input(5) : nullptr;
    const Tensor* sum_sq = combined_ ? &Input(6) : nullptr;
    if (combined_) per_channel.insert(per_channel.end(), {{5, &sum->shape()}, {6, &sum_sq->shape()}});
    int64_t channels = ChannelCount(def_, x.shape(), per_channel);
    Tensor* y = Output(0);  // y has x's shape and layout
    auto desc = DescOf(x);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, AsMemory(x)},
                                               {DNNL_ARG_DST, ResizeForDesc(y, x.shape(), desc)},
                                               {DNNL_ARG_SCALE, ChannelMemory(scale)},
                                               {DNNL_ARG_SHIFT, ChannelMemory(bias)}};
    if (desc != desc_) {
      desc_ = desc;
      auto forward = ForwardDesc(desc, epsilon_, is_test_ || combined_, relu_, !(is_test_ || combined_));
      workspace_desc_ = forward.workspace_desc();
      primitive_ = dnnl::batch_normalization_forward(forward);
    }
    if (is_test_) {
      args[DNNL_ARG_MEAN] = ChannelMemory(running_mean);
      args[DNNL_ARG_VARIANCE] = ChannelMemory(running_var);
      Execute(primitive_, args);
      return;
    }
    if (x.numel() == 0)
      FailOperator(def_, fmt::format("training needs a non-empty batch, X is {}", ShapeToString(x.shape())));
    // With combined statistics "this batch" is the whole batch across the replicas.
    Tensor* saved_mean = Output(3);  // saved_mean is (C): this batch's mean
    Tensor* saved_var = Output(4);   // saved_var is (C): this batch's biased variance
    saved_mean->Resize({channels});
    saved_var->Resize({channels});
    if (combined_)
      CombinedStatistics(*sum, *sum_sq, num_batches_ * (x.numel() / channels), saved_mean->data<float>(),
                         saved_var->data<float>());
    args[DNNL_ARG_MEAN] = ToMemory(*saved_mean);
    args[DNNL_ARG_VARIANCE] = ToMemory(*saved_var);
    if (relu_) {
      Tensor* mask = Output(5);  // mask is oneDNN's ReLU workspace: opaque bytes, where BN(x) > 0
      mask->Resize({static_cast<int64_t>(workspace_desc_.get_size())}, DataType::kUInt8);
      args[DNNL_ARG_WORKSPACE] = dnnl::memory(workspace_desc_, CpuEngine(), mask->raw_data());
    }
    Execute(primitive_, args);

    // Caffe2 folds the biased batch variance into the running variance; we keep its numbers.
    float* mean = Output(1)->data<float>();
    float* var = Output(2)->data<float>();
    const float* batch_mean = saved_mean->data<float>();
    const float* batch_var = saved_var->data<float>();
    for (int64_t c = 0; c < channels; ++c) {
      mean[c] = momentum_ * mean[c] + (1 - momentum_) * batch_mean[c];
      var[c] = momentum_ * var[c] + (1 - momentum_) * batch_var[c];
    }
  }

 private:
  // mean = S / count and the biased variance Q / count - mean^2 (clamped at 0 against rounding), where
  // count is the number of values summed per channel. sum, sum_sq, mean and var are (C).
  static void CombinedStatistics(const Tensor& sum, const Tensor& sum_sq, int64_t count, float* mean,
                                 float* var) {
    const float* s = sum.data<float>();
    const float* q = sum_sq.data<float>();
    for (int64_t c = 0; c < sum.numel(); ++c) {
      double m = static_cast<double>(s[c]) / count;
      mean[c] = static_cast<float>(m);
      var[c] = static_cast<float>(std::max(static_cast<double>(q[c]) / count - m * m, 0.0));
    }
  }

  bool is_test_;
  float epsilon_;
  float momentum_;
  bool relu_;
  bool combined_;  // with 7 inputs: the statistics of the whole batch across replicas (CombinesStatistics)
  int64_t num_batches_;
  dnnl::memory::desc desc_, workspace_desc_;
  dnnl::batch_normalization_forward primitive_;
};

// relu(BN(X)) again, with the statistics and in the form of the training pass, so Y and the mask are the
// bits SpatialBN(relu=1) wrote: the backward pass computes them instead of keeping them
// (parallel/recompute.h).
class SpatialBNReluAgainOp : public Operator {
 public:
  SpatialBNReluAgainOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), epsilon_(FloatArg("epsilon")) {
    AcceptLayouts();
  }

  void Run() override {
    const Tensor& x = Input(0);  // x is (N, C, H, W) or (N, C)
    ChannelCount(
        def_, x.shape(),
        {{1, &Input(1).shape()}, {2, &Input(2).shape()}, {3, &Input(3).shape()}, {4, &Input(4).shape()}});
    auto desc = DescOf(x);
    if (desc != desc_) {
      desc_ = desc;
      auto forward = ForwardDesc(desc, epsilon_, /*global_stats=*/true, /*relu=*/true, /*training=*/true);
      workspace_desc_ = forward.workspace_desc();
      primitive_ = dnnl::batch_normalization_forward(forward);
    }
    Tensor* mask = Output(1);  // mask is oneDNN's ReLU workspace, as SpatialBN's output 5
    mask->Resize({static_cast<int64_t>(workspace_desc_.get_size())}, DataType::kUInt8);
    Execute(primitive_, {{DNNL_ARG_SRC, AsMemory(x)},
                         {DNNL_ARG_DST, ResizeForDesc(Output(0), x.shape(), desc)},
                         {DNNL_ARG_SCALE, ChannelMemory(Input(1))},
                         {DNNL_ARG_SHIFT, ChannelMemory(Input(2))},
                         {DNNL_ARG_MEAN, ChannelMemory(Input(3))},
                         {DNNL_ARG_VARIANCE, ChannelMemory(Input(4))},
                         {DNNL_ARG_WORKSPACE, dnnl::memory(workspace_desc_, CpuEngine(), mask->raw_data())}});
  }

 private:
  float epsilon_;
  dnnl::memory::desc desc_, workspace_desc_;
  dnnl::batch_normalization_forward primitive_;
};

// Arg `gradients` lists which of dX (0), dscale (1), dbias (2) are outputs, in that order. oneDNN computes
// dX with a scale only together with dscale and dbias, so the ones not listed go to scratch.
// With relu=1 the gradients are those of relu(BN(X)): the forward pass's ReLU mask (input 5) zeroes dY.
class SpatialBNGradientOp : public Operator {
 public:
  SpatialBNGradientOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws),
        is_test_(IntArg("is_test") != 0),
        epsilon_(FloatArg("epsilon")),
        relu_(IntArg("relu") != 0),
        output_of_(SpatialBNGradientOutputs(def)) {
    AcceptLayouts();
  }

  void Run() override {
    const Tensor& x = Input(0);           // x is (N, C, H, W) or (N, C)
    const Tensor& scale = Input(1);       // scale is (C)
    const Tensor& dy = Input(2);          // dy has x's shape, any layout
    const Tensor& saved_mean = Input(3);  // saved_mean is (C): batch mean (running mean with is_test)
    const Tensor& saved_var = Input(4);  // saved_var is (C): batch biased variance (running one with is_test)
    int64_t channels = SpatialBNGradientChannels(def_, x.shape(), scale.shape(), saved_mean.shape(),
                                                 saved_var.shape(), dy.shape());
    auto desc = DescOf(x);
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, AsMemory(x)},
        {DNNL_ARG_DIFF_DST, ReorderIfNeeded(AsMemory(dy), desc, 0)},
        {DNNL_ARG_MEAN, ChannelMemory(saved_mean)},
        {DNNL_ARG_VARIANCE, ChannelMemory(saved_var)},
        {DNNL_ARG_SCALE, ChannelMemory(scale)},
        // dx has x's shape and layout
        {DNNL_ARG_DIFF_SRC, ResizeForDesc(Target(0, &dx_scratch_), x.shape(), desc)}};
    if (desc != desc_) {
      desc_ = desc;
      dnnl::batch_normalization_backward::primitive_desc backward(
          CpuEngine(), dnnl::prop_kind::backward, desc, desc, desc, epsilon_, Flags(is_test_, relu_),
          ForwardDesc(desc, epsilon_, is_test_, relu_, !is_test_));
      workspace_desc_ = backward.workspace_desc();
      primitive_ = dnnl::batch_normalization_backward(backward);
    }
    if (relu_) {
      const Tensor& mask = Input(5);  // mask is SpatialBN's output 5 for this X
      if (mask.dtype() != DataType::kUInt8 || mask.nbytes() != workspace_desc_.get_size())
        FailOperator(def_,
                     fmt::format("the mask must be the {} uint8 bytes SpatialBN wrote for X {}, got {} {}",
                                 workspace_desc_.get_size(), ShapeToString(x.shape()),
                                 DataTypeName(mask.dtype()), ShapeToString(mask.shape())));
      args[DNNL_ARG_WORKSPACE] =
          dnnl::memory(workspace_desc_, CpuEngine(), const_cast<void*>(mask.raw_data()));
    }
    Tensor* dscale = Target(1, &dscale_scratch_);  // dscale is (C)
    Tensor* dbias = Target(2, &dbias_scratch_);    // dbias is (C)
    dscale->Resize({channels});
    dbias->Resize({channels});
    args[DNNL_ARG_DIFF_SCALE] = ToMemory(*dscale);
    args[DNNL_ARG_DIFF_SHIFT] = ToMemory(*dbias);
    Execute(primitive_, args);
  }

 private:
  // The output for gradient `which`, or the op's scratch tensor when that gradient is not wanted.
  Tensor* Target(int which, Tensor* scratch) {
    return output_of_[which] >= 0 ? Output(output_of_[which]) : scratch;
  }

  bool is_test_;
  float epsilon_;
  bool relu_;
  const std::array<int, 3> output_of_;                  // per gradient (dX, dscale, dbias): its output, or -1
  Tensor dx_scratch_, dscale_scratch_, dbias_scratch_;  // for the gradients that are not outputs
  dnnl::memory::desc desc_, workspace_desc_;
  dnnl::batch_normalization_backward primitive_;
};

// With combined statistics dX depends on dscale and dbias summed over all replicas. ChannelBackpropStats
// writes this replica's sums (which are also its gradients of scale and bias); data parallelism sums them
// over the replicas into "<name>_combined" blobs (an Allreduce it inserts) before SpatialBNCombinedGradient
// reads them. Sums that are not wanted as gradients still get blobs, named after dY, because dX needs them.
std::vector<OperatorDef> CombinedStatisticsGradient(const GradientContext& g) {
  std::string dscale = g.NeedsGI(1) ? g.GI(1) : g.GO(0) + "_dscale";
  std::string dbias = g.NeedsGI(2) ? g.GI(2) : g.GO(0) + "_dbias";
  float epsilon = FloatArg(g.def, "epsilon");
  std::vector<OperatorDef> ops;
  if (g.NeedsGI(0) || g.NeedsGI(1) || g.NeedsGI(2))
    ops.push_back(MakeOperatorDef("ChannelBackpropStats", {g.I(0), g.O(3), g.O(4), g.GO(0)}, {dscale, dbias},
                                  {Arg("epsilon", epsilon)}));
  if (g.NeedsGI(0))
    ops.push_back(MakeOperatorDef(
        "SpatialBNCombinedGradient",
        {g.I(0), g.I(1), g.GO(0), g.O(3), g.O(4), CombinedName(dscale), CombinedName(dbias)}, {g.GI(0)},
        {Arg("epsilon", epsilon), Arg("num_batches", IntArg(g.def, "num_batches"))}));
  return ops;
}

std::vector<OperatorDef> SpatialBNGradient(const GradientContext& g) {
  if (CombinesStatistics(g.def)) return CombinedStatisticsGradient(g);
  bool is_test = IntArg(g.def, "is_test") != 0;
  bool relu = IntArg(g.def, "relu") != 0;
  // Test-mode nets are evaluated, never trained, so the fused test-mode op keeps no mask to differentiate.
  if (relu && is_test)
    FailOperator(g.def, "relu=1 with is_test=1 has no gradient; use is_test=0, or SpatialBN then Relu");
  // Test mode differentiates through the running statistics, training mode through the batch's.
  std::vector<std::string> inputs{g.I(0), g.I(1), g.GO(0), is_test ? g.I(3) : g.O(3),
                                  is_test ? g.I(4) : g.O(4)};
  if (relu) inputs.push_back(g.O(5));
  std::vector<std::string> outputs;
  std::vector<int64_t> gradients;
  for (int i = 0; i < 3; ++i) {
    if (!g.NeedsGI(i)) continue;
    outputs.push_back(g.GI(i));
    gradients.push_back(i);
  }
  auto args = g.Args();
  if (gradients.size() < 3) args.emplace_back("gradients", gradients);
  return {MakeOperatorDef("SpatialBNGradient", inputs, outputs, args)};
}

// Caffe2's combined SpatialBN: per-replica channel sums (ChannelStats), summed over the replicas into their
// CombinedName blobs by the data-parallel planner, then normalization with num_batches = replicas. A fused
// ReLU is split off first, because its mask belongs to the single-replica form. Test mode is left alone.
std::vector<OperatorDef> CombineStatisticsAcrossReplicas(const OperatorDef& op, int replicas) {
  if (IntArg(op, "is_test") != 0 || op.input_size() != 5) return {op};
  const std::string& y = op.output(0);
  OperatorDef stats = MakeOperatorDef("ChannelStats", {op.input(0)}, {y + "_sum", y + "_sumsq"});
  *stats.mutable_device_option() = op.device_option();
  OperatorDef bn = op;
  bn.add_input(CombinedName(stats.output(0)));
  bn.add_input(CombinedName(stats.output(1)));
  SetArgument(&bn, Arg("num_batches", int64_t{replicas}));
  const bool relu = IntArg(op, "relu") != 0;
  SetArgument(&bn, Arg("relu", false));
  if (!relu) return {stats, bn};
  bn.mutable_output()->RemoveLast();  // the ReLU mask
  // Out of place, so that ReLU's gradient writes a blob of its own: dY may come from a model-parallel stage
  // on another device, which an in-place gradient could not update.
  bn.set_output(0, y + "_normalized");
  OperatorDef activation = MakeOperatorDef("Relu", {bn.output(0)}, {y});
  *activation.mutable_device_option() = op.device_option();
  return {stats, bn, activation};
}

// (X, scale, dY, mean, inv_std[, mask]) -> the gradients listed in arg `gradients` (default dX, dscale,
// dbias): dX has X's shape, dscale and dbias scale's.
std::vector<TensorShape> SpatialBNGradientShapes(const OperatorDef& def, const std::vector<TensorShape>& in) {
  SpatialBNGradientChannels(def, in[0].dims, in[1].dims, in[3].dims, in[4].dims, in[2].dims);
  const std::array<int, 3> output_of = SpatialBNGradientOutputs(def);
  std::vector<TensorShape> out(def.output_size());
  for (int i = 0; i < 3; ++i)
    if (output_of[i] >= 0) out[output_of[i]] = i == 0 ? in[0] : TensorShape{in[1].dims, DataType::kFloat};
  return out;
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(SpatialBN)
    .SetDoc(
        "Batch normalization over the channels of NCHW (or NC) data. Training normalizes with the batch's "
        "statistics (or, with 7 inputs, those of the whole batch across replicas) and folds them into the "
        "running ones; test mode normalizes with the running ones. relu=1 applies a ReLU in the same pass.")
    .Input(0, "X", "(N, C) or (N, C, spatial...)")
    .Input(1, "scale", "(C)")
    .Input(2, "bias", "(C)")
    .Input(3, "running_mean", "(C)")
    .Input(4, "running_var", "(C)")
    .OptionalInput(5, "sum", "(C), sum of X over all replicas (combined statistics only)")
    .OptionalInput(6, "sumsq", "(C), sum of X^2 over all replicas (combined statistics only)")
    .Output(0, "Y", "X's shape")
    .OptionalOutput(1, "running_mean", "training: input 3, updated in place")
    .OptionalOutput(2, "running_var", "training: input 4, updated in place")
    .OptionalOutput(3, "saved_mean", "training: the batch mean, for the gradient")
    .OptionalOutput(4, "saved_var", "training: the batch variance, for the gradient")
    .OptionalOutput(5, "relu_mask", "training with relu=1: the ReLU mask, for the gradient")
    .Arg("is_test", ArgType::kInt, 0, "1: normalize with the running statistics; only output Y")
    .Range(0, 1)
    .Arg("epsilon", ArgType::kFloat, kDefaultEpsilon, "added to the variance before its inverse square root")
    .Min(0)
    .Arg("momentum", ArgType::kFloat, 0.9f, "running = momentum * running + (1 - momentum) * batch")
    .Range(0, 1)
    .Arg("relu", ArgType::kInt, 0, "1: Y = relu(BN(X)), keeping the mask in training")
    .Range(0, 1)
    .Arg("num_batches", ArgType::kInt, 1,
         "combined statistics: the replicas (equal batches) that the sums of inputs 5 and 6 cover")
    .Min(1)
    .Include(DeclareNchwOrder)
    .EnforceInplace({{3, 1}, {4, 2}})
    .ShapeFunction(SpatialBNShapes)
    .LowPrecisionInputs({0})  // scale, bias and the statistics stay float32
    .CombineAcrossReplicas(CombineStatisticsAcrossReplicas);
LOCKSTEP_OPERATOR_SCHEMA(SpatialBNGradient)
    .SetDoc(
        "SpatialBN's gradient, for the statistics it normalized with; the outputs are those `gradients` "
        "lists.")
    .Input(0, "X", "SpatialBN's input")
    .Input(1, "scale", "(C)")
    .Input(2, "dY", "X's shape")
    .Input(3, "mean", "(C): saved_mean in training, running_mean in test mode")
    .Input(4, "var", "(C): saved_var in training, running_var in test mode")
    .OptionalInput(5, "relu_mask", "with relu=1")
    .Output(0, "dX", "X's shape (the outputs are those `gradients` lists, in order)")
    .OptionalOutput(1, "dscale", "(C)")
    .OptionalOutput(2, "dbias", "(C)")
    .ArgsOf("SpatialBN")
    .Arg("gradients", ArgType::kInts, std::vector<int64_t>{0, 1, 2},
         "the gradients written, increasing: 0 dX, 1 dscale, 2 dbias")
    .Range(0, 2)
    .ShapeFunction(SpatialBNGradientShapes)
    .LowPrecisionInputs({0, 2});  // scale and the statistics stay float32
LOCKSTEP_OPERATOR_SCHEMA(SpatialBNReluAgain)
    .SetDoc(
        "relu(BN(X)) and its ReLU mask again from a training SpatialBN(relu=1)'s input and saved statistics: "
        "the same bits, for the backward pass, which then need not keep them.")
    .Input(0, "X", "the training SpatialBN's input")
    .Input(1, "scale", "(C)")
    .Input(2, "bias", "(C)")
    .Input(3, "saved_mean", "(C): the training SpatialBN's output 3")
    .Input(4, "saved_var", "(C): the training SpatialBN's output 4")
    .Output(0, "Y", "X's shape")
    .Output(1, "relu_mask", "as the training SpatialBN's output 5")
    .Arg("epsilon", ArgType::kFloat, kDefaultEpsilon, "the training SpatialBN's")
    .Min(0)
    .ShapeFunction(SpatialBNReluAgainShapes)
    .LowPrecisionInputs({0});
LOCKSTEP_REGISTER_CPU_OPERATOR(SpatialBN, SpatialBNOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(SpatialBNReluAgain, SpatialBNReluAgainOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(SpatialBNGradient, SpatialBNGradientOp);
LOCKSTEP_REGISTER_GRADIENT(SpatialBN, SpatialBNGradient);

}  // namespace lockstep
