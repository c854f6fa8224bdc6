// ChannelStats, ChannelBackpropStats and SpatialBNCombinedGradient on CUDA devices, as
// ops/channel_stats_ops.cc defines them: the per-channel sums of X and X^2 (forward) and of dY and
// dY * (X - mean) (backward) that batch normalization with statistics combined across replicas all-reduces,
// and dX from the summed dscale and dbias. X, dY and dX are plain (N, C, spatial...) float32, float16 or
// bfloat16; the per-channel tensors are float32. Sums are taken in double in a fixed order, so a run gives
// the same sums every time.
#include <algorithm>
#include <cub/block/block_reduce.cuh>
#include <utility>
#include <vector>

#include "lockstep/core/operator.h"
#include "lockstep/cuda/cuda_context.h"
#include "lockstep/ops/batch_norm_channels.h"
#include "lockstep/ops/cuda/channel_sums.h"
#include "lockstep/ops/cuda/cuda_kernels.cuh"

namespace lockstep {
namespace {

using cuda::BlocksFor;
using cuda::DispatchFloating;
using cuda::kThreads;
using cuda::LoadFloat;
using cuda::StoreFloat;

// A channel's values are summed in up to kMaxParts parts by separate blocks, each thread taking about
// kValuesPerThread of them, so that a few wide channels still fill the GPU.
constexpr int64_t kMaxParts = 64;
constexpr int64_t kValuesPerThread = 16;

// x and x^2 of element i. x is (N, C, S).
template <typename T>
struct SquareTerms {
  const T* x;
  __device__ void operator()(int64_t i, int64_t, double& first, double& second) const {
    const double v = LoadFloat(x, i);
    first += v;
    second += v * v;
  }
};

// x of element i (the second sum stays zero).
template <typename T>
struct PlainTerms {
  const T* x;
  __device__ void operator()(int64_t i, int64_t, double& first, double&) const { first += LoadFloat(x, i); }
};

// dy and dy * (x - mean[c]) of element i, of channel c. x and dy are (N, C, S); mean is (C).
template <typename T>
struct BackpropTerms {
  const T* x;
  const T* dy;
  const float* mean;
  __device__ void operator()(int64_t i, int64_t c, double& first, double& second) const {
    const double g = LoadFloat(dy, i);
    first += g;
    second += g * (static_cast<double>(LoadFloat(x, i)) - mean[c]);
  }
};

// Block (c, part) sums term's two values over channel c's elements j = part * blockDim + thread, then every
// gridDim.y * blockDim further, j counting the channel's (n, s) positions as n * S + s. partials is
// (C, parts, 2).
template <typename Term>
__global__ void ChannelPartialSumsKernel(int64_t batch, int64_t channels, int64_t spatial, Term term,
                                         double* partials) {
  using BlockReduce = cub::BlockReduce<double, kThreads>;
  __shared__ typename BlockReduce::TempStorage storage;
  const int64_t parts = gridDim.y, stride = parts * blockDim.x;
  const int64_t first_j = blockIdx.y * int64_t{blockDim.x} + threadIdx.x;
  // n and s advance with j without a division per element.
  const int64_t step_n = stride / spatial, step_s = stride % spatial;
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    double first = 0, second = 0;
    for (int64_t n = first_j / spatial, s = first_j % spatial; n < batch;) {
      term((n * channels + c) * spatial + s, c, first, second);
      n += step_n;
      s += step_s;
      if (s >= spatial) {
        s -= spatial;
        ++n;
      }
    }
    first = BlockReduce(storage).Sum(first);
    __syncthreads();  // the second reduction reuses the storage
    second = BlockReduce(storage).Sum(second);
    if (threadIdx.x == 0) {
      partials[(c * parts + blockIdx.y) * 2] = first;
      partials[(c * parts + blockIdx.y) * 2 + 1] = second;
    }
    __syncthreads();  // so does the next channel
  }
}

// Channel c's two sums: its parts added in order. partials is (C, parts, 2).
__device__ double2 ChannelSums(const double* partials, int64_t c, int64_t parts) {
  double2 sums{0, 0};
  for (int64_t p = 0; p < parts; ++p) {
    sums.x += partials[(c * parts + p) * 2];
    sums.y += partials[(c * parts + p) * 2 + 1];
  }
  return sums;
}

// sum and sum_sq are (C): the sums of x and x^2.
__global__ void ChannelStatsKernel(const double* partials, int64_t channels, int64_t parts, float* sum,
                                   float* sum_sq) {
  LOCKSTEP_KERNEL_LOOP(c, channels) {
    const double2 sums = ChannelSums(partials, c, parts);
    sum[c] = static_cast<float>(sums.x);
    sum_sq[c] = static_cast<float>(sums.y);
  }
}

// sum[c]: channel c's first sum, rounded to T.
template <typename T>
__global__ void ChannelSumKernel(const double* partials, int64_t channels, int64_t parts, T* sum) {
  LOCKSTEP_KERNEL_LOOP(c, channels) {
    StoreFloat(sum, c, static_cast<float>(ChannelSums(partials, c, parts).x));
  }
}

// dscale = sum(dy * (x - mean)) / sqrt(var + epsilon) and dbias = sum(dy). var, dscale and dbias are (C).
__global__ void BackpropStatsKernel(const double* partials, int64_t channels, int64_t parts, const float* var,
                                    float epsilon, float* dscale, float* dbias) {
  LOCKSTEP_KERNEL_LOOP(c, channels) {
    const double2 sums = ChannelSums(partials, c, parts);
    dscale[c] = static_cast<float>(sums.y / sqrt(static_cast<double>(var[c]) + epsilon));
    dbias[c] = static_cast<float>(sums.x);
  }
}

// Queues the per-channel partial sums of term over x (N, C, S) into the device's workspace and returns them
// with the number of parts per channel. x must not be empty.
template <typename Term>
std::pair<const double*, int64_t> LaunchPartialSums(cuda::CudaContext& context, const Tensor& x, Term term) {
  const int64_t batch = x.dim(0), channels = x.dim(1), spatial = x.numel() / (batch * channels);
  const int64_t parts = std::clamp<int64_t>(batch * spatial / (kThreads * kValuesPerThread), 1, kMaxParts);
  auto* partials = static_cast<double*>(context.Workspace(channels * parts * 2 * sizeof(double)));
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(channels, 65535)), static_cast<unsigned>(parts));
  ChannelPartialSumsKernel<<<grid, kThreads, 0, context.stream()>>>(batch, channels, spatial, term, partials);
  LOCKSTEP_CUDA_CHECK_LAUNCH();
  return {partials, parts};
}

}  // namespace

void cuda::SumPerChannel(const OperatorDef& def, CudaContext& context, const Tensor& dy, Tensor* sums) {
  const int64_t channels = dy.dim(1);
  sums->Resize({channels}, dy.dtype());
  DispatchFloating(def, dy.dtype(), [&](auto zero) {
    using T = decltype(zero);
    auto [partials, parts] =
        LaunchPartialSums(context, dy, PlainTerms<T>{static_cast<const T*>(dy.raw_data())});
    ChannelSumKernel<<<BlocksFor(channels), kThreads, 0, context.stream()>>>(
        partials, channels, parts, static_cast<T*>(sums->raw_data()));
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
}

namespace {

// Each listed per-channel input (index, tensor) must be float32.
void CheckFloat32(const OperatorDef& def, const std::vector<std::pair<int, const Tensor*>>& per_channel) {
  for (const auto& [input, tensor] : per_channel)
    if (tensor->dtype() != DataType::kFloat)
      FailOperator(def, fmt::format("input '{}' is {}; per-channel tensors are float32 on CUDA devices",
                                    def.input(input), DataTypeName(tensor->dtype())));
}

// dY must have X's shape (the CPU operator's check) and dtype.
void CheckGradient(const OperatorDef& def, const Tensor& x, const Tensor& dy) {
  if (dy.shape() != x.shape())
    FailOperator(def, fmt::format("dY {} must have X's shape {}", ShapeToString(dy.shape()),
                                  ShapeToString(x.shape())));
  if (dy.dtype() != x.dtype())
    FailOperator(def, fmt::format("dY is {} but X is {}; they must have one dtype", DataTypeName(dy.dtype()),
                                  DataTypeName(x.dtype())));
}

// Resizes a pair of per-channel sums to (C); over an empty batch they are zero. Returns whether x has values
// to sum.
bool ResizeChannelSums(const Tensor& x, int64_t channels, Tensor* first, Tensor* second) {
  first->Resize({channels});
  second->Resize({channels});
  if (x.numel() > 0) return true;
  first->Zero();
  second->Zero();
  return false;
}

class CudaChannelStatsOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& x = Input(0);  // x is (N, C, H, W) or (N, C)
    const int64_t channels = ChannelCount(def_, x.shape(), {});
    Tensor* sum = Output(0);     // sum is (C): x summed over N, H, W
    Tensor* sum_sq = Output(1);  // sum_sq is (C): x^2 summed over N, H, W
    DispatchFloating(def_, x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      if (!ResizeChannelSums(x, channels, sum, sum_sq)) return;
      cuda::CudaContext& context = cuda::ContextFor(device().id);
      auto [partials, parts] =
          LaunchPartialSums(context, x, SquareTerms<T>{static_cast<const T*>(x.raw_data())});
      ChannelStatsKernel<<<BlocksFor(channels), kThreads, 0, context.stream()>>>(
          partials, channels, parts, sum->data<float>(), sum_sq->data<float>());
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    });
  }
};

// This replica's dscale = sum(dY * xhat) and dbias = sum(dY): its gradients of SpatialBN's scale and bias,
// and its share of the sums SpatialBNCombinedGradient needs.
class CudaChannelBackpropStatsOp : public Operator {
 public:
  CudaChannelBackpropStatsOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), epsilon_(FloatArg("epsilon")) {}

  void Run() override {
    const Tensor& x = Input(0);     // x is (N, C, H, W) or (N, C)
    const Tensor& mean = Input(1);  // mean is (C): SpatialBN's saved_mean
    const Tensor& var = Input(2);   // var is (C): SpatialBN's saved_var, a biased variance
    const Tensor& dy = Input(3);    // dy has x's shape and dtype
    const int64_t channels = ChannelCount(def_, x.shape(), {{1, &mean.shape()}, {2, &var.shape()}});
    CheckGradient(def_, x, dy);
    CheckFloat32(def_, {{1, &mean}, {2, &var}});
    Tensor* dscale = Output(0);  // dscale is (C): sum(dy * xhat), xhat = (x - mean) / sqrt(var + epsilon)
    Tensor* dbias = Output(1);   // dbias is (C): sum(dy)
    DispatchFloating(def_, x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      if (!ResizeChannelSums(x, channels, dscale, dbias)) return;
      cuda::CudaContext& context = cuda::ContextFor(device().id);
      auto [partials, parts] =
          LaunchPartialSums(context, x,
                            BackpropTerms<T>{static_cast<const T*>(x.raw_data()),
                                             static_cast<const T*>(dy.raw_data()), mean.data<float>()});
      BackpropStatsKernel<<<BlocksFor(channels), kThreads, 0, context.stream()>>>(
          partials, channels, parts, var.data<float>(), epsilon_, dscale->data<float>(),
          dbias->data<float>());
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    });
  }

 private:
  const float epsilon_;
};

// The CPU's per-channel coefficients of dX = dy_factor * dY + x_factor * X + constant, in double with its
// operations (no fused multiply-add), rounded to float: rstd = 1 / sqrt(var + epsilon), dy_factor = scale *
// rstd, x_factor = -dy_factor * rstd * dscale / count, constant = -dy_factor * dbias / count - x_factor *
// mean. scale, mean, var, dscale and dbias are (C); coefficients is (3, C): dy_factor, x_factor, constant.
__global__ void CombinedGradientCoefficientsKernel(int64_t channels, double count, float epsilon,
                                                   const float* scale, const float* mean, const float* var,
                                                   const float* dscale, const float* dbias,
                                                   float* coefficients) {
  LOCKSTEP_KERNEL_LOOP(c, channels) {
    const double rstd = 1 / sqrt(static_cast<double>(var[c]) + epsilon);
    const double dy_factor = scale[c] * rstd;
    const double x_factor = -dy_factor * rstd * dscale[c] / count;
    coefficients[c] = static_cast<float>(dy_factor);
    coefficients[channels + c] = static_cast<float>(x_factor);
    coefficients[2 * channels + c] =
        static_cast<float>(__dsub_rn(-dy_factor * dbias[c] / count, __dmul_rn(x_factor, mean[c])));
  }
}

// dx = dy_factor * dy + x_factor * x + constant with the CPU's float operations. x, dy and dx are (N, C, S);
// coefficients is (3, C).
template <typename T>
__global__ void CombinedGradientKernel(const T* x, const T* dy, const float* coefficients, int64_t channels,
                                       int64_t spatial, int64_t n, T* dx) {
  LOCKSTEP_KERNEL_LOOP(i, n) {
    const int64_t c = i / spatial % channels;
    const float from_dy = __fmul_rn(coefficients[c], LoadFloat(dy, i));
    const float from_x = __fmul_rn(coefficients[channels + c], LoadFloat(x, i));
    StoreFloat(dx, i, __fadd_rn(__fadd_rn(from_dy, from_x), coefficients[2 * channels + c]));
  }
}

// dX of SpatialBN with combined statistics, from dscale and dbias summed over all num_batches replicas:
//   dX = scale * rstd * (dY - (dbias + xhat * dscale) / M),  xhat = (X - mean) * rstd,
// M = num_batches * N * H * W the number of values per channel in the whole batch.
class CudaSpatialBNCombinedGradientOp : public Operator {
 public:
  CudaSpatialBNCombinedGradientOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), epsilon_(FloatArg("epsilon")), num_batches_(IntArg("num_batches")) {}

  void Run() override {
    const Tensor& x = Input(0);           // x is (N, C, H, W) or (N, C)
    const Tensor& scale = Input(1);       // scale is (C)
    const Tensor& dy = Input(2);          // dy has x's shape and dtype
    const Tensor& mean = Input(3);        // mean is (C): SpatialBN's saved_mean
    const Tensor& var = Input(4);         // var is (C): SpatialBN's saved_var
    const Tensor& dscale_all = Input(5);  // dscale_all is (C): ChannelBackpropStats' dscale, all replicas
    const Tensor& dbias_all = Input(6);   // dbias_all is (C): ChannelBackpropStats' dbias, all replicas
    const int64_t channels = ChannelCount(def_, x.shape(),
                                          {{1, &scale.shape()},
                                           {3, &mean.shape()},
                                           {4, &var.shape()},
                                           {5, &dscale_all.shape()},
                                           {6, &dbias_all.shape()}});
    CheckGradient(def_, x, dy);
    CheckFloat32(def_, {{1, &scale}, {3, &mean}, {4, &var}, {5, &dscale_all}, {6, &dbias_all}});
    Tensor* dx = Output(0);  // dx has x's shape and dtype
    dx->Resize(x.shape(), x.dtype());
    DispatchFloating(def_, x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      if (x.numel() == 0) return;
      cudaStream_t stream = cuda::ContextFor(device().id).stream();
      const int64_t batch = x.dim(0), spatial = x.numel() / (batch * channels);
      coefficients_.PlaceOn(device());
      coefficients_.Resize({3, channels});
      CombinedGradientCoefficientsKernel<<<BlocksFor(channels), kThreads, 0, stream>>>(
          channels, static_cast<double>(num_batches_) * batch * spatial, epsilon_, scale.data<float>(),
          mean.data<float>(), var.data<float>(), dscale_all.data<float>(), dbias_all.data<float>(),
          coefficients_.data<float>());
      LOCKSTEP_CUDA_CHECK_LAUNCH();
      CombinedGradientKernel<<<BlocksFor(x.numel()), kThreads, 0, stream>>>(
          static_cast<const T*>(x.raw_data()), static_cast<const T*>(dy.raw_data()),
          coefficients_.data<float>(), channels, spatial, x.numel(), static_cast<T*>(dx->raw_data()));
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    });
  }

 private:
  const float epsilon_;
  const int64_t num_batches_;
  Tensor coefficients_;  // (3, C) float32 in device memory: dy_factor, x_factor, constant
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(ChannelStats, CudaChannelStatsOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(ChannelBackpropStats, CudaChannelBackpropStatsOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(SpatialBNCombinedGradient, CudaSpatialBNCombinedGradientOp);

}  // namespace lockstep
