// SpatialBN: batch normalization over the channel axis of NCHW (or NC) data, with oneDNN's
// batch_normalization. Training normalizes with the batch statistics and folds them into the running ones;
// test mode uses the latter. X, Y, dY and dX keep X's layout (blocked nChw16c is several times faster than
// plain NCHW); the per-channel tensors are plain. With arg relu=1 the op computes relu(BN(X)) in the same
// pass: training then also writes oneDNN's ReLU mask, which the gradient reads instead of a separate Relu's
// output and gradient passes over the whole activation.
#include <algorithm>

#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/dnnl_utils.h"

namespace lockstep {
namespace {

constexpr float kDefaultEpsilon = 1e-5f;
constexpr float kDefaultMomentum = 0.9f;

// Checks X and the per-channel inputs (given as input index and shape) and returns the channel count.
int64_t ChannelCount(const OperatorDef& def, const Shape& x,
                     const std::vector<std::pair<int, const Shape*>>& per_channel) {
  if (x.size() < 2 || x.size() > 5)
    throw InvalidInput(
        fmt::format("{}: X must be (N, C) or (N, C, H, W), got {}", DescribeOperator(def), ShapeToString(x)));
  int64_t channels = x[1];
  for (const auto& [input, shape] : per_channel)
    if (*shape != Shape{channels})
      throw InvalidInput(fmt::format("{}: input '{}' must be ({}) to match the channels of X {}, got {}",
                                     DescribeOperator(def), def.input(input), channels, ShapeToString(x),
                                     ShapeToString(*shape)));
  return channels;
}

// Y alone in test mode; in training Y, running_mean, running_var, saved_mean, saved_var and, with relu=1,
// the ReLU mask.
int CheckedNumOutputs(const OperatorDef& def) {
  bool is_test = GetIntArgument(def, "is_test", 0) != 0;
  bool relu = GetIntArgument(def, "relu", 0) != 0;
  int expected = is_test ? 1 : relu ? 6 : 5;
  if (def.output_size() != expected)
    throw InvalidInput(fmt::format("{}: takes {} outputs with is_test={} and relu={}, got {}",
                                   DescribeOperator(def), expected, is_test ? 1 : 0, relu ? 1 : 0,
                                   def.output_size()));
  return expected;
}

dnnl::normalization_flags Flags(bool is_test, bool relu) {
  auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  if (is_test) flags |= dnnl::normalization_flags::use_global_stats;
  if (relu) flags |= dnnl::normalization_flags::fuse_norm_relu;
  return flags;
}

dnnl::batch_normalization_forward::primitive_desc ForwardDesc(const dnnl::memory::desc& x, float epsilon,
                                                              bool is_test, bool relu) {
  auto kind = is_test ? dnnl::prop_kind::forward_inference : dnnl::prop_kind::forward_training;
  dnnl::batch_normalization_forward::desc desc(kind, x, epsilon, Flags(is_test, relu));
  return dnnl::batch_normalization_forward::primitive_desc(desc, CpuEngine());
}

// The mask is opaque bytes whose count depends on X's layout (bits per element and channel padding vary
// with the implementation oneDNN picks); inference reports the count for plain X.
std::vector<TensorShape> SpatialBNShapes(const OperatorDef& def, const std::vector<TensorShape>& in) {
  int num_outputs = CheckedNumOutputs(def);
  int64_t channels =
      ChannelCount(def, in[0].dims, {{1, &in[1].dims}, {2, &in[2].dims}, {3, &in[3].dims}, {4, &in[4].dims}});
  std::vector<TensorShape> out{in[0]};
  for (int i = 1; i < std::min(num_outputs, 5); ++i) out.push_back({{channels}, DataType::kFloat});
  if (num_outputs == 6) {
    float epsilon = GetFloatArgument(def, "epsilon", kDefaultEpsilon);
    auto forward = ForwardDesc(PlainDesc(in[0].dims), epsilon, false, true);
    out.push_back({{static_cast<int64_t>(forward.workspace_desc().get_size())}, DataType::kUInt8});
  }
  return out;
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
        is_test_(IntArg("is_test", 0) != 0),
        epsilon_(FloatArg("epsilon", kDefaultEpsilon)),
        momentum_(FloatArg("momentum", kDefaultMomentum)),
        relu_(IntArg("relu", 0) != 0) {
    AcceptLayouts();
    CheckedNumOutputs(def);
  }

  void Run() override {
    const Tensor& x = Input(0);             // x is (N, C, H, W) or (N, C)
    const Tensor& scale = Input(1);         // scale is (C)
    const Tensor& bias = Input(2);          // bias is (C)
    const Tensor& running_mean = Input(3);  // running_mean is (C); training updates it in place (output 1)
    const Tensor& running_var = Input(4);   // running_var is (C); training updates it in place (output 2)
    int64_t channels = ChannelCount(
        def_, x.shape(),
        {{1, &scale.shape()}, {2, &bias.shape()}, {3, &running_mean.shape()}, {4, &running_var.shape()}});
    Tensor* y = Output(0);  // y has x's shape and layout
    auto desc = DescOf(x);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, AsMemory(x)},
                                               {DNNL_ARG_DST, ResizeForDesc(y, x.shape(), desc)},
                                               {DNNL_ARG_SCALE, ChannelMemory(scale)},
                                               {DNNL_ARG_SHIFT, ChannelMemory(bias)}};
    if (desc != desc_) {
      desc_ = desc;
      auto forward = ForwardDesc(desc, epsilon_, is_test_, relu_);
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
      throw InvalidInput(fmt::format("{}: training needs a non-empty batch, X is {}", DescribeOperator(def_),
                                     ShapeToString(x.shape())));
    Tensor* saved_mean = Output(3);  // saved_mean is (C): this batch's mean
    Tensor* saved_var = Output(4);   // saved_var is (C): this batch's biased variance
    saved_mean->Resize({channels});
    saved_var->Resize({channels});
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
  bool is_test_;
  float epsilon_;
  float momentum_;
  bool relu_;
  dnnl::memory::desc desc_, workspace_desc_;
  dnnl::batch_normalization_forward primitive_;
};

// Arg `gradients` lists which of dX (0), dscale (1), dbias (2) are outputs, in that order. oneDNN 2.6
// computes dX with a scale only together with dscale and dbias, so the ones not listed go to scratch.
// With relu=1 the gradients are those of relu(BN(X)): the forward pass's ReLU mask (input 5) zeroes dY.
class SpatialBNGradientOp : public Operator {
 public:
  SpatialBNGradientOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws),
        is_test_(IntArg("is_test", 0) != 0),
        epsilon_(FloatArg("epsilon", kDefaultEpsilon)),
        relu_(IntArg("relu", 0) != 0) {
    AcceptLayouts();
    if (relu_ && is_test_)
      throw InvalidInput(fmt::format("{}: relu=1 needs the training forward pass's mask; is_test=1 has none",
                                     DescribeOperator(def)));
    if (InputSize() != (relu_ ? 6 : 5))
      throw InvalidInput(fmt::format(
          "{}: takes {} inputs with relu={} (X, scale, dY, saved_mean, saved_var{}), got {}",
          DescribeOperator(def), relu_ ? 6 : 5, relu_ ? 1 : 0, relu_ ? ", mask" : "", InputSize()));
    auto gradients = IntsArg("gradients", {0, 1, 2});
    if (gradients.size() != static_cast<size_t>(OutputSize()))
      throw InvalidInput(fmt::format("{}: arg gradients lists {} outputs but the op has {}",
                                     DescribeOperator(def), gradients.size(), OutputSize()));
    for (size_t i = 0; i < gradients.size(); ++i) {
      if (gradients[i] < 0 || gradients[i] > 2 || (i > 0 && gradients[i] <= gradients[i - 1]))
        throw InvalidInput(
            fmt::format("{}: arg gradients must be increasing indices among 0 (dX), 1 (dscale), "
                        "2 (dbias)",
                        DescribeOperator(def)));
      output_of_[gradients[i]] = static_cast<int>(i);
    }
  }

  void Run() override {
    const Tensor& x = Input(0);           // x is (N, C, H, W) or (N, C)
    const Tensor& scale = Input(1);       // scale is (C)
    const Tensor& dy = Input(2);          // dy has x's shape, any layout
    const Tensor& saved_mean = Input(3);  // saved_mean is (C): batch mean (running mean with is_test)
    const Tensor& saved_var = Input(4);  // saved_var is (C): batch biased variance (running one with is_test)
    int64_t channels = ChannelCount(def_, x.shape(),
                                    {{1, &scale.shape()}, {3, &saved_mean.shape()}, {4, &saved_var.shape()}});
    if (dy.shape() != x.shape())
      throw InvalidInput(fmt::format("{}: dY {} must have X's shape {}", DescribeOperator(def_),
                                     ShapeToString(dy.shape()), ShapeToString(x.shape())));
    auto desc = DescOf(x);
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, AsMemory(x)},
        {DNNL_ARG_DIFF_DST, ReorderIfNeeded(AsMemory(dy), desc, &dy_scratch_)},
        {DNNL_ARG_MEAN, ChannelMemory(saved_mean)},
        {DNNL_ARG_VARIANCE, ChannelMemory(saved_var)},
        {DNNL_ARG_SCALE, ChannelMemory(scale)},
        // dx has x's shape and layout
        {DNNL_ARG_DIFF_SRC, ResizeForDesc(Target(0, &dx_scratch_), x.shape(), desc)}};
    if (desc != desc_) {
      desc_ = desc;
      dnnl::batch_normalization_backward::desc op_desc(dnnl::prop_kind::backward, desc, desc, epsilon_,
                                                       Flags(is_test_, relu_));
      dnnl::batch_normalization_backward::primitive_desc backward(
          op_desc, CpuEngine(), ForwardDesc(desc, epsilon_, is_test_, relu_));
      workspace_desc_ = backward.workspace_desc();
      primitive_ = dnnl::batch_normalization_backward(backward);
    }
    if (relu_) {
      const Tensor& mask = Input(5);  // mask is SpatialBN's output 5 for this X
      if (mask.dtype() != DataType::kUInt8 || mask.nbytes() != workspace_desc_.get_size())
        throw InvalidInput(
            fmt::format("{}: the mask must be the {} uint8 bytes SpatialBN wrote for X {}, got {} {}",
                        DescribeOperator(def_), workspace_desc_.get_size(), ShapeToString(x.shape()),
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
    // oneDNN 2.6 insists on a shift argument here although the backward pass never reads it.
    args[DNNL_ARG_SHIFT] = args[DNNL_ARG_SCALE];
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
  int output_of_[3] = {-1, -1, -1};
  Tensor dx_scratch_, dscale_scratch_, dbias_scratch_;  // for the gradients that are not outputs
  dnnl::memory dy_scratch_;
  dnnl::memory::desc desc_, workspace_desc_;
  dnnl::batch_normalization_backward primitive_;
};

std::vector<OperatorDef> SpatialBNGradient(const GradientContext& g) {
  bool is_test = GetIntArgument(g.def, "is_test", 0) != 0;
  bool relu = GetIntArgument(g.def, "relu", 0) != 0;
  // Test-mode nets are evaluated, never trained, so the fused test-mode op keeps no mask to differentiate.
  if (relu && is_test)
    throw InvalidInput(
        fmt::format("{}: relu=1 with is_test=1 has no gradient; use is_test=0, or SpatialBN then Relu",
                    DescribeOperator(g.def)));
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

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(SpatialBN)
    .NumInputs(5)
    .NumOutputs(1, 6)
    .EnforceInplace({{3, 1}, {4, 2}})
    .ShapeFunction(SpatialBNShapes);
LOCKSTEP_OPERATOR_SCHEMA(SpatialBNGradient).NumInputs(5, 6).NumOutputs(1, 3);
LOCKSTEP_REGISTER_CPU_OPERATOR(SpatialBN, SpatialBNOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(SpatialBNGradient, SpatialBNGradientOp);
LOCKSTEP_REGISTER_GRADIENT(SpatialBN, SpatialBNGradient);

}  // namespace lockstep
