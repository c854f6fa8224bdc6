// Batch normalization with statistics combined across data-parallel replicas (Caffe2's approach), apart from
// SpatialBN's 7-input form. Each replica sums per channel X and X^2 (ChannelStats) and, backward, dY and
// dY * xhat (ChannelBackpropStats); an Allreduce sums those over the replicas; SpatialBN and
// SpatialBNCombinedGradient then normalize and differentiate with the whole batch's numbers. X and dY are
// read in their plain or channel-blocked layout without conversion, and dX keeps X's layout and dtype
// (float32, or bfloat16 in a bfloat16 pass; the sums are float32 either way).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "lockstep/core/gradient.h"
#include "lockstep/core/half.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/batch_norm_channels.h"
#include "lockstep/ops/dnnl_utils.h"

namespace lockstep {
namespace {

constexpr int64_t kMaxBlock = ChannelView::kMaxBlock;
constexpr int64_t kRun = 64;  // spatial positions summed in float before a double takes the sum

// Elements of X, dY and dX as float32, inline so that the loops below vectorize for both element types.
inline float Widen(float value) { return value; }
inline float Widen(BFloat16 value) {
  const uint32_t bits = uint32_t{value.bits} << 16;
  float widened;
  std::memcpy(&widened, &bits, sizeof widened);
  return widened;
}
inline void Narrow(float value, float* out) { *out = value; }
inline void Narrow(float value, BFloat16* out) { *out = ToBFloat16(value); }

// Calls body(elements) with X's buffer seen as its element type: float or BFloat16.
template <typename Body>
void WithElements(const OperatorDef& def, const Tensor& x, Body body) {
  if (x.dtype() == DataType::kFloat) return body(static_cast<const float*>(x.raw_data()));
  if (x.dtype() == DataType::kBFloat16) return body(static_cast<const BFloat16*>(x.raw_data()));
  FailOperator(def, fmt::format("X is {}; use float32 or bfloat16", DataTypeName(x.dtype())));
}

template <typename Pointer>
using ElementOf = std::remove_cv_t<std::remove_pointer_t<Pointer>>;

// Per-channel sums, over N and the spatial dims of an (N, C, spatial...) tensor, of two terms of each
// element. Every (sample, channel block) pair is summed on its own, in parallel, into a slot kept across
// runs; the slots are then added in sample order, so results do not depend on the thread count. Float sums
// over runs of kRun positions vectorize; the doubles stay accurate over the millions of values in a channel
// of a large batch.
class ChannelSums {
 public:
  // term(i, c, first, second) adds the two terms of buffer element i, of channel c, to first and second.
  // Padding channels of the last block (c >= C, present in blocked buffers) are summed too, then dropped.
  template <typename Term>
  void Compute(const ChannelView& view, Term term) {
    const int64_t batch = view.batch, num_blocks = view.NumBlocks(), block = view.block;
    const int64_t padded = num_blocks * block;
    partials_.resize(batch * 2 * padded);
#pragma omp parallel for collapse(2)
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t b = 0; b < num_blocks; ++b) {
        double first[kMaxBlock] = {}, second[kMaxBlock] = {};
        for (int64_t begin = 0; begin < view.spatial; begin += kRun) {
          float first_run[kMaxBlock] = {}, second_run[kMaxBlock] = {};
          const int64_t end = std::min(begin + kRun, view.spatial);
          for (int64_t s = begin; s < end; ++s) {
            const int64_t offset = view.Offset(n, b, s);
#pragma omp simd
            for (int64_t l = 0; l < block; ++l) term(offset + l, b * block + l, first_run[l], second_run[l]);
          }
          for (int64_t l = 0; l < block; ++l) {
            first[l] += first_run[l];
            second[l] += second_run[l];
          }
        }
        double* slot = partials_.data() + n * 2 * padded + b * block;
        for (int64_t l = 0; l < block; ++l) {
          slot[l] = first[l];
          slot[padded + l] = second[l];
        }
      }
    }
    first_.assign(view.channels, 0.0);
    second_.assign(view.channels, 0.0);
    for (int64_t n = 0; n < batch; ++n) {
      const double* slot = partials_.data() + n * 2 * padded;
      for (int64_t c = 0; c < view.channels; ++c) {
        first_[c] += slot[c];
        second_[c] += slot[padded + c];
      }
    }
  }

  double first(int64_t c) const { return first_[c]; }
  double second(int64_t c) const { return second_[c]; }

 private:
  std::vector<double> partials_;        // (N, 2, padded C): each sample's sums of the two terms
  std::vector<double> first_, second_;  // (C)
};

class ChannelStatsOp : public Operator {
 public:
  ChannelStatsOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws) { AcceptLayouts(); }

  void Run() override {
    int64_t channels = ChannelCount(def_, Input(0).shape(), {});
    ChannelView view;
    const Tensor& x = ChannelAddressable(Input(0), &x_plain_, &view);  // x is (N, C, H, W) or (N, C)
    Tensor* sum = Output(0);                                           // sum is (C): x summed over N, H, W
    Tensor* sum_sq = Output(1);  // sum_sq is (C): x^2 summed over N, H, W
    sum->Resize({channels});
    sum_sq->Resize({channels});
    WithElements(def_, x, [&](const auto* data) {
      sums_.Compute(view, [data](int64_t i, int64_t, float& total, float& total_sq) {
        const float value = Widen(data[i]);
        total += value;
        total_sq += value * value;
      });
    });
    float *sums = sum->data<float>(), *sums_sq = sum_sq->data<float>();
    for (int64_t c = 0; c < channels; ++c) {
      sums[c] = static_cast<float>(sums_.first(c));
      sums_sq[c] = static_cast<float>(sums_.second(c));
    }
  }

 private:
  Tensor x_plain_;  // X converted, when its layout has no channel view
  ChannelSums sums_;
};

// dY in X's layout and dtype (reordered into scratch when either differs), after checking their shapes
// match.
const void* GradientInLayoutOf(const OperatorDef& def, const Tensor& x, const Tensor& dy) {
  if (dy.shape() != x.shape())
    FailOperator(def, fmt::format("dY {} must have X's shape {}", ShapeToString(dy.shape()),
                                  ShapeToString(x.shape())));
  return ReorderIfNeeded(AsMemory(dy), DescOf(x), 0).get_data_handle();
}

// This replica's dscale = sum(dY * xhat) and dbias = sum(dY): its gradients of SpatialBN's scale and bias,
// and its share of the sums SpatialBNCombinedGradient needs.
class ChannelBackpropStatsOp : public Operator {
 public:
  ChannelBackpropStatsOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), epsilon_(FloatArg("epsilon")) {
    AcceptLayouts();
  }

  void Run() override {
    const Tensor& mean = Input(1);  // mean is (C): SpatialBN's saved_mean
    const Tensor& var = Input(2);   // var is (C): SpatialBN's saved_var, a biased variance
    int64_t channels = ChannelCount(def_, Input(0).shape(), {{1, &mean.shape()}, {2, &var.shape()}});
    ChannelView view;
    const Tensor& x = ChannelAddressable(Input(0), &x_plain_, &view);  // x is (N, C, H, W) or (N, C)
    const void* dy_data = GradientInLayoutOf(def_, x, Input(3));       // dy has x's shape and dtype
    Tensor* dscale = Output(0);  // dscale is (C): sum(dy * xhat), xhat = (x - mean) / sqrt(var + epsilon)
    Tensor* dbias = Output(1);   // dbias is (C): sum(dy)
    dscale->Resize({channels});
    dbias->Resize({channels});
    padded_mean_.assign(view.NumBlocks() * view.block, 0.f);
    std::copy(mean.data<float>(), mean.data<float>() + channels, padded_mean_.begin());
    const float* centre = padded_mean_.data();
    WithElements(def_, x, [&](const auto* data) {
      const auto* dy = static_cast<const ElementOf<decltype(data)>*>(dy_data);
      sums_.Compute(view, [data, dy, centre](int64_t i, int64_t c, float& total_dy, float& total_dy_centred) {
        const float gradient = Widen(dy[i]);
        total_dy += gradient;
        total_dy_centred += gradient * (Widen(data[i]) - centre[c]);
      });
    });
    const float* variance = var.data<float>();
    float *dgamma = dscale->data<float>(), *dbeta = dbias->data<float>();
    for (int64_t c = 0; c < channels; ++c) {
      dgamma[c] =
          static_cast<float>(sums_.second(c) / std::sqrt(static_cast<double>(variance[c]) + epsilon_));
      dbeta[c] = static_cast<float>(sums_.first(c));
    }
  }

 private:
  float epsilon_;
  Tensor x_plain_;                  // X converted, when its layout has no channel view
  std::vector<float> padded_mean_;  // mean with zeros for the padding channels of X's last block
  ChannelSums sums_;
};

// dX of SpatialBN with combined statistics, from dscale and dbias summed over all num_batches replicas:
//   dX = scale * rstd * (dY - (dbias + xhat * dscale) / M),  xhat = (X - mean) * rstd,
// M = num_batches * N * H * W the number of values per channel in the whole batch. Per channel that is
// dX = dy_factor * dY + x_factor * X + constant, with the three computed once per run.
class SpatialBNCombinedGradientOp : public Operator {
 public:
  SpatialBNCombinedGradientOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), epsilon_(FloatArg("epsilon")), num_batches_(IntArg("num_batches")) {
    AcceptLayouts();
  }

  void Run() override {
    const Tensor& scale = Input(1);       // scale is (C)
    const Tensor& mean = Input(3);        // mean is (C): SpatialBN's saved_mean
    const Tensor& var = Input(4);         // var is (C): SpatialBN's saved_var
    const Tensor& dscale_all = Input(5);  // dscale_all is (C): ChannelBackpropStats' dscale, all replicas
    const Tensor& dbias_all = Input(6);   // dbias_all is (C): ChannelBackpropStats' dbias, all replicas
    int64_t channels = ChannelCount(def_, Input(0).shape(),
                                    {{1, &scale.shape()},
                                     {3, &mean.shape()},
                                     {4, &var.shape()},
                                     {5, &dscale_all.shape()},
                                     {6, &dbias_all.shape()}});
    ChannelView view;
    const Tensor& x = ChannelAddressable(Input(0), &x_plain_, &view);  // x is (N, C, H, W) or (N, C)
    const void* dy = GradientInLayoutOf(def_, x, Input(2));            // dy has x's shape and dtype
    Tensor* dx = Output(0);                                            // dx has x's shape, layout and dtype
    ResizeForDesc(dx, x.shape(), DescOf(x));
    if (x.numel() == 0) return;

    // Padding channels of the last block keep zero coefficients, so their dX is 0 as blocked layouts need.
    const int64_t padded = view.NumBlocks() * view.block;
    dy_factor_.assign(padded, 0.f);
    x_factor_.assign(padded, 0.f);
    constant_.assign(padded, 0.f);
    const double count = static_cast<double>(num_batches_) * view.batch * view.spatial;
    const float *gamma = scale.data<float>(), *mu = mean.data<float>(), *sigma2 = var.data<float>();
    const float *dgamma = dscale_all.data<float>(), *dbeta = dbias_all.data<float>();
    for (int64_t c = 0; c < channels; ++c) {
      double rstd = 1 / std::sqrt(static_cast<double>(sigma2[c]) + epsilon_);
      double dy_factor = gamma[c] * rstd;
      double x_factor = -dy_factor * rstd * dgamma[c] / count;
      dy_factor_[c] = static_cast<float>(dy_factor);
      x_factor_[c] = static_cast<float>(x_factor);
      constant_[c] = static_cast<float>(-dy_factor * dbeta[c] / count - x_factor * mu[c]);
    }
    WithElements(def_, x, [&](const auto* data) {
      using T = ElementOf<decltype(data)>;
      Apply(data, static_cast<const T*>(dy), view, static_cast<T*>(dx->raw_data()));
    });
  }

 private:
  // x, dy and dx are (N, C, spatial...) laid out as `view` says.
  template <typename T>
  void Apply(const T* x, const T* dy, const ChannelView& view, T* dx) const {
    const int64_t batch = view.batch, num_blocks = view.NumBlocks(), block = view.block;
#pragma omp parallel for collapse(2)
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t b = 0; b < num_blocks; ++b) {
        const float* dy_factor = dy_factor_.data() + b * block;
        const float* x_factor = x_factor_.data() + b * block;
        const float* constant = constant_.data() + b * block;
        for (int64_t s = 0; s < view.spatial; ++s) {
          const int64_t offset = view.Offset(n, b, s);
#pragma omp simd
          for (int64_t l = 0; l < block; ++l)
            Narrow(dy_factor[l] * Widen(dy[offset + l]) + x_factor[l] * Widen(x[offset + l]) + constant[l],
                   dx + offset + l);
        }
      }
    }
  }

  float epsilon_;
  int64_t num_batches_;
  Tensor x_plain_;                                      // X converted, when its layout has no channel view
  std::vector<float> dy_factor_, x_factor_, constant_;  // per channel of X's blocks, padding included
};

// Two per-channel outputs from X (input 0), checked against the per-channel inputs listed.
std::vector<TensorShape> TwoChannelShapes(const OperatorDef& def, const std::vector<TensorShape>& in,
                                          const std::vector<int>& per_channel_inputs) {
  std::vector<std::pair<int, const Shape*>> per_channel;
  for (int i : per_channel_inputs) per_channel.emplace_back(i, &in[i].dims);
  int64_t channels = ChannelCount(def, in[0].dims, per_channel);
  return {{{channels}, DataType::kFloat}, {{channels}, DataType::kFloat}};
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(ChannelStats)
    .SetDoc(
        "Per-channel sums of X and of X^2 over N and the spatial dims: this replica's share of the batch "
        "statistics that data parallelism sums over the replicas.")
    .Input(0, "X", "(N, C) or (N, C, spatial...)")
    .Output(0, "sum", "(C)")
    .Output(1, "sumsq", "(C)")
    .ShapeFunction([](const OperatorDef& def, const std::vector<TensorShape>& in) {
      return TwoChannelShapes(def, in, {});
    })
    .SummedAcrossReplicas()
    .LowPrecisionInputs({0});  // the sums stay float32
LOCKSTEP_OPERATOR_SCHEMA(ChannelBackpropStats)
    .SetDoc(
        "This replica's dscale = sum(dY * xhat) and dbias = sum(dY) per channel: its gradients of "
        "SpatialBN's scale and bias, which data parallelism sums over the replicas.")
    .Input(0, "X", "SpatialBN's input")
    .Input(1, "mean", "(C): SpatialBN's saved_mean")
    .Input(2, "var", "(C): SpatialBN's saved_var")
    .Input(3, "dY", "X's shape")
    .Output(0, "dscale", "(C)")
    .Output(1, "dbias", "(C)")
    .Arg("epsilon", ArgType::kFloat, kDefaultEpsilon, "SpatialBN's epsilon")
    .Min(0)
    .ShapeFunction([](const OperatorDef& def, const std::vector<TensorShape>& in) {
      return TwoChannelShapes(def, in, {1, 2});
    })
    .SummedAcrossReplicas()
    .LowPrecisionInputs({0, 3});  // the statistics and the sums stay float32
LOCKSTEP_OPERATOR_SCHEMA(SpatialBNCombinedGradient)
    .SetDoc("dX of SpatialBN with combined statistics, from dscale and dbias summed over all replicas.")
    .Input(0, "X", "SpatialBN's input")
    .Input(1, "scale", "(C)")
    .Input(2, "dY", "X's shape")
    .Input(3, "mean", "(C): SpatialBN's saved_mean")
    .Input(4, "var", "(C): SpatialBN's saved_var")
    .Input(5, "dscale_all", "(C): ChannelBackpropStats' dscale summed over the replicas")
    .Input(6, "dbias_all", "(C): ChannelBackpropStats' dbias summed over the replicas")
    .Output(0, "dX", "X's shape")
    .Arg("epsilon", ArgType::kFloat, kDefaultEpsilon, "SpatialBN's epsilon")
    .Min(0)
    .Arg("num_batches", ArgType::kInt, 1, "the replicas (equal batches) the sums cover")
    .Min(1)
    .IdentityShape()
    .LowPrecisionInputs({0, 2});  // the per-channel tensors stay float32
LOCKSTEP_REGISTER_CPU_OPERATOR(ChannelStats, ChannelStatsOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(ChannelBackpropStats, ChannelBackpropStatsOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(SpatialBNCombinedGradient, SpatialBNCombinedGradientOp);
LOCKSTEP_NO_GRADIENT(ChannelStats);
LOCKSTEP_NO_GRADIENT(ChannelBackpropStats);

}  // namespace lockstep
