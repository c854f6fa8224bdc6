// SpatialBN and SpatialBNGradient on CUDA devices with cuDNN's spatial batch normalization, with the inputs,
// outputs, arguments and numbers of the CPU operators (ops/spatial_bn_op.cc): saved_var and the running
// variance hold the biased batch variance, the running statistics move as momentum * running + (1 - momentum)
// * batch, relu=1 fuses a ReLU whose mask the gradient reads, and 7 inputs normalize with statistics combined
// across replicas. X, Y, dY and dX are float32, float16 or bfloat16; the per-channel tensors are float32, as
// cuDNN wants them for every data type.
#include <algorithm>
#include <array>
#include <cub/block/block_reduce.cuh>
#include <utility>
#include <vector>

#include "lockstep/core/operator.h"
#include "lockstep/cuda/cuda_context.h"
#include "lockstep/ops/batch_norm_channels.h"
#include "lockstep/ops/cuda/cuda_kernels.cuh"
#include "lockstep/ops/cuda/cudnn_utils.h"
#include "lockstep/ops/spatial_bn_op.h"

namespace lockstep {
namespace {

using cuda::BlocksFor;
using cuda::DispatchFloating;
using cuda::kOne;
using cuda::kThreads;
using cuda::kZero;
using cuda::LoadFloat;
using cuda::StoreFloat;

constexpr cudnnBatchNormMode_t kMode = CUDNN_BATCHNORM_SPATIAL;

// Training asks cuDNN for the batch variance through its running variance, which cuDNN keeps unbiased
// (count / (count - 1) times the biased one); when `unbiased`, this turns it back into the biased variance
// the CPU reports (0 for a single value). Then it folds the batch statistics into the running ones with the
// CPU's float arithmetic (no fused multiply-add). batch_mean, batch_var, running_mean and running_var are
// (C).
__global__ void FinishStatisticsKernel(int64_t channels, int64_t count, bool unbiased, float momentum,
                                       const float* batch_mean, float* batch_var, float* running_mean,
                                       float* running_var) {
  const float batch_weight = 1 - momentum;
  LOCKSTEP_KERNEL_LOOP(c, channels) {
    float var = batch_var[c];
    if (unbiased) var = count > 1 ? static_cast<float>(static_cast<double>(var) * (count - 1) / count) : 0.0f;
    batch_var[c] = var;
    running_mean[c] = __fadd_rn(__fmul_rn(momentum, running_mean[c]), __fmul_rn(batch_weight, batch_mean[c]));
    running_var[c] = __fadd_rn(__fmul_rn(momentum, running_var[c]), __fmul_rn(batch_weight, var));
  }
}

// mean = sum / count and the biased variance sum_sq / count - mean^2 (clamped at 0 against rounding), in
// double as on the CPU; count is the number of values summed per channel. sum, sum_sq, mean and var are (C).
__global__ void CombinedStatisticsKernel(int64_t channels, int64_t count, const float* sum,
                                         const float* sum_sq, float* mean, float* var) {
  LOCKSTEP_KERNEL_LOOP(c, channels) {
    const double m = static_cast<double>(sum[c]) / count;
    mean[c] = static_cast<float>(m);
    var[c] = static_cast<float>(fmax(static_cast<double>(sum_sq[c]) / count - m * m, 0.0));
  }
}

// y = max(y, 0) in place; mask, when given, records a 1 where y > 0 and a 0 elsewhere. y and mask are (n).
template <typename T>
__global__ void ReluKernel(T* y, uint8_t* mask, int64_t n) {
  LOCKSTEP_KERNEL_LOOP(i, n) {
    const bool positive = LoadFloat(y, i) > 0.0f;
    if (!positive) StoreFloat(y, i, 0.0f);
    if (mask) mask[i] = positive;
  }
}

// masked = dy where the forward pass's ReLU let BN(x) through, else 0. dy, mask and masked are (n).
template <typename T>
__global__ void MaskGradientKernel(const T* dy, const uint8_t* mask, T* masked, int64_t n) {
  LOCKSTEP_KERNEL_LOOP(i, n) { StoreFloat(masked, i, mask[i] ? LoadFloat(dy, i) : 0.0f); }
}

// inv_std = 1 / sqrt(var + epsilon): cuDNN's saved inverse standard deviation from the CPU's saved variance.
// var and inv_std are (C).
__global__ void InverseStdKernel(int64_t channels, float epsilon, const float* var, float* inv_std) {
  LOCKSTEP_KERNEL_LOOP(c, channels) { inv_std[c] = 1.0f / sqrtf(var[c] + epsilon); }
}

// The gradients of y = scale * (x - mean) * inv_std + bias with the statistics held fixed (test mode), which
// cuDNN does not offer: per channel dbias = sum(dy), dscale = sum(dy * (x - mean) * inv_std) and
// dx = dy * scale * inv_std. A block works on one channel at a time. x, dy and dx (null when not wanted) are
// (N, C, S); scale, mean, inv_std, dscale and dbias are (C).
template <typename T>
__global__ void FixedStatisticsGradientKernel(const T* x, const T* dy, const float* scale, const float* mean,
                                              const float* inv_std, int64_t batch, int64_t channels,
                                              int64_t spatial, T* dx, float* dscale, float* dbias) {
  using BlockReduce = cub::BlockReduce<float, kThreads>;
  __shared__ typename BlockReduce::TempStorage storage;
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    const float gain = scale[c] * inv_std[c];
    float sum_dy = 0.0f, sum_dy_xhat = 0.0f;
    for (int64_t j = threadIdx.x; j < batch * spatial; j += blockDim.x) {
      const int64_t i = (j / spatial * channels + c) * spatial + j % spatial;
      const float g = LoadFloat(dy, i);
      sum_dy += g;
      sum_dy_xhat += g * (LoadFloat(x, i) - mean[c]) * inv_std[c];
      if (dx) StoreFloat(dx, i, g * gain);
    }
    const float total_dy = BlockReduce(storage).Sum(sum_dy);
    __syncthreads();  // the second reduction reuses the storage
    const float total_dy_xhat = BlockReduce(storage).Sum(sum_dy_xhat);
    if (threadIdx.x == 0) {
      dbias[c] = total_dy;
      dscale[c] = total_dy_xhat;
    }
    __syncthreads();  // so does the next channel
  }
}

float CheckedEpsilon(const OperatorDef& def) {
  float epsilon = FloatArg(def, "epsilon");
  if (!(epsilon >= CUDNN_BN_MIN_EPSILON))
    FailOperator(def,
                 fmt::format("epsilon must be at least {} for cuDNN, got {}", CUDNN_BN_MIN_EPSILON, epsilon));
  return epsilon;
}

// Each listed per-channel input (index, shape) must be float32.
void CheckFloat32(const OperatorDef& def, const std::vector<std::pair<int, const Tensor*>>& per_channel) {
  for (const auto& [input, tensor] : per_channel)
    if (tensor->dtype() != DataType::kFloat)
      FailOperator(def,
                   fmt::format("input '{}' is {}; per-channel tensors are float32 on CUDA devices (cuDNN "
                               "keeps batch-normalization parameters and statistics in float32)",
                               def.input(input), DataTypeName(tensor->dtype())));
}

// cuDNN's descriptors of X and of its per-channel tensors, for the shape and dtype last described.
class BatchNormDescriptors {
 public:
  void Describe(const OperatorDef& def, const Tensor& x) {
    if (x.shape() == shape_ && x.dtype() == type_) return;
    type_ = DataType::kUndefined;  // until both descriptors match the new shape
    cuda::SetTensorDescriptor(def, x_.get(), x.dtype(), x.shape());
    LOCKSTEP_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(channel_.get(), x_.get(), kMode));
    shape_ = x.shape();
    type_ = x.dtype();
  }
  cudnnTensorDescriptor_t x() const { return x_.get(); }
  cudnnTensorDescriptor_t channel() const { return channel_.get(); }

 private:
  Shape shape_;
  DataType type_ = DataType::kUndefined;
  cuda::TensorDescriptor x_, channel_;
};

// relu(y) in place, recording where y > 0 into mask unless it is null. y is any shape; mask has y's size.
void LaunchRelu(const OperatorDef& def, Tensor* y, uint8_t* mask, cudaStream_t stream) {
  DispatchFloating(def, y->dtype(), [&](auto zero) {
    using T = decltype(zero);
    ReluKernel<<<BlocksFor(y->numel()), kThreads, 0, stream>>>(static_cast<T*>(y->raw_data()), mask,
                                                               y->numel());
    LOCKSTEP_CUDA_CHECK_LAUNCH();
  });
}

class CudnnSpatialBNOp : public Operator {
 public:
  CudnnSpatialBNOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws),
        is_test_(IntArg("is_test") != 0),
        epsilon_(CheckedEpsilon(def)),
        momentum_(FloatArg("momentum")),
        relu_(IntArg("relu") != 0),
        combined_(CombinesStatistics(def)),
        num_batches_(IntArg("num_batches")) {
    SpatialBNNumOutputs(def);
  }

  void Run() override {
    const Tensor& x = Input(0);             // x is (N, C, spatial...) or (N, C)
    const Tensor& scale = Input(1);         // scale is (C)
    const Tensor& bias = Input(2);          // bias is (C)
    const Tensor& running_mean = Input(3);  // running_mean is (C); training updates it in place (output 1)
    const Tensor& running_var = Input(4);   // running_var is (C); training updates it in place (output 2)
    // sum and sum_sq are (C): X and X^2 summed over the batches of all num_batches replicas
    const Tensor* sum = combined_ ? &Input(5) : nullptr;
    const Tensor* sum_sq = combined_ ? &Input(6) : nullptr;
    std::vector<std::pair<int, const Tensor*>> per_channel{
        {1, &scale}, {2, &bias}, {3, &running_mean}, {4, &running_var}};
    if (combined_) per_channel.insert(per_channel.end(), {{5, sum}, {6, sum_sq}});
    std::vector<std::pair<int, const Shape*>> shapes;
    for (const auto& [input, tensor] : per_channel) shapes.emplace_back(input, &tensor->shape());
    const int64_t channels = ChannelCount(def_, x.shape(), shapes);
    cuda::CudnnDataType(def_, "X", x.dtype());
    CheckFloat32(def_, per_channel);
    Tensor* y = Output(0);  // y has x's shape and dtype
    y->Resize(x.shape(), x.dtype());
    if (x.numel() == 0) {
      if (is_test_) return;
      FailOperator(def_, fmt::format("training needs a non-empty batch, X is {}", ShapeToString(x.shape())));
    }

    cuda::CudaContext& context = cuda::ContextFor(device().id);
    cudnnHandle_t cudnn = context.cudnn();
    desc_.Describe(def_, x);
    if (is_test_) {
      LOCKSTEP_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
          cudnn, kMode, &kOne, &kZero, desc_.x(), x.raw_data(), desc_.x(), y->raw_data(), desc_.channel(),
          scale.raw_data(), bias.raw_data(), running_mean.raw_data(), running_var.raw_data(), epsilon_));
      if (relu_) LaunchRelu(def_, y, nullptr, context.stream());
      return;
    }

    // With combined statistics "this batch" is the whole batch across the replicas.
    Tensor* saved_mean = Output(3);  // saved_mean is (C): this batch's mean
    Tensor* saved_var = Output(4);   // saved_var is (C): this batch's biased variance
    saved_mean->Resize({channels});
    saved_var->Resize({channels});
    const int64_t count = x.numel() / channels;  // values per channel in this replica's batch
    if (combined_) {
      CombinedStatisticsKernel<<<BlocksFor(channels), kThreads, 0, context.stream()>>>(
          channels, num_batches_ * count, sum->data<float>(), sum_sq->data<float>(),
          saved_mean->data<float>(), saved_var->data<float>());
      LOCKSTEP_CUDA_CHECK_LAUNCH();
      LOCKSTEP_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
          cudnn, kMode, &kOne, &kZero, desc_.x(), x.raw_data(), desc_.x(), y->raw_data(), desc_.channel(),
          scale.raw_data(), bias.raw_data(), saved_mean->raw_data(), saved_var->raw_data(), epsilon_));
    } else {
      // cuDNN's running averages with factor 1 are this batch's mean and unbiased variance. It still
      // multiplies their old values by 0, so they start from 0 rather than from whatever (a NaN) was there.
      saved_mean->Zero();
      saved_var->Zero();
      LOCKSTEP_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
          cudnn, kMode, &kOne, &kZero, desc_.x(), x.raw_data(), desc_.x(), y->raw_data(), desc_.channel(),
          scale.raw_data(), bias.raw_data(), 1.0, saved_mean->raw_data(), saved_var->raw_data(), epsilon_,
          nullptr, nullptr));
    }
    Tensor* new_mean = cuda::InPlaceState(running_mean, Output(1));
    Tensor* new_var = cuda::InPlaceState(running_var, Output(2));
    FinishStatisticsKernel<<<BlocksFor(channels), kThreads, 0, context.stream()>>>(
        channels, count, !combined_, momentum_, saved_mean->data<float>(), saved_var->data<float>(),
        new_mean->data<float>(), new_var->data<float>());
    LOCKSTEP_CUDA_CHECK_LAUNCH();
    if (relu_) {
      Tensor* mask = Output(5);  // mask is (numel of X) uint8: 1 where BN(x) > 0
      mask->Resize({x.numel()}, DataType::kUInt8);
      LaunchRelu(def_, y, mask->data<uint8_t>(), context.stream());
    }
  }

 private:
  const bool is_test_;
  const float epsilon_;
  const float momentum_;
  const bool relu_;
  const bool combined_;  // with 7 inputs: the statistics of the whole batch across replicas
  const int64_t num_batches_;
  BatchNormDescriptors desc_;
};

// Arg `gradients` lists which of dX (0), dscale (1), dbias (2) are outputs, in that order; cuDNN computes all
// three, so the ones not listed go to scratch. With relu=1 the gradients are those of relu(BN(X)): the
// forward pass's mask (input 5) zeroes dY first.
class CudnnSpatialBNGradientOp : public Operator {
 public:
  CudnnSpatialBNGradientOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws),
        is_test_(IntArg("is_test") != 0),
        epsilon_(CheckedEpsilon(def)),
        relu_(IntArg("relu") != 0),
        output_of_(SpatialBNGradientOutputs(def)) {}

  void Run() override {
    const Tensor& x = Input(0);           // x is (N, C, spatial...) or (N, C)
    const Tensor& scale = Input(1);       // scale is (C)
    const Tensor& dy = Input(2);          // dy has x's shape and dtype
    const Tensor& saved_mean = Input(3);  // saved_mean is (C): batch mean (running mean with is_test)
    const Tensor& saved_var = Input(4);  // saved_var is (C): batch biased variance (running one with is_test)
    const int64_t channels = SpatialBNGradientChannels(def_, x.shape(), scale.shape(), saved_mean.shape(),
                                                       saved_var.shape(), dy.shape());
    cuda::CudnnDataType(def_, "X", x.dtype());
    if (dy.dtype() != x.dtype())
      FailOperator(def_, fmt::format("dY is {} but X is {}; they must have one dtype",
                                     DataTypeName(dy.dtype()), DataTypeName(x.dtype())));
    CheckFloat32(def_, {{1, &scale}, {3, &saved_mean}, {4, &saved_var}});
    const uint8_t* mask = relu_ ? CheckedMask(Input(5), x) : nullptr;
    Tensor* dx = Wanted(0);  // dx has x's shape and dtype
    if (dx) dx->Resize(x.shape(), x.dtype());
    Tensor* dscale = Target(1, &dscale_scratch_);  // dscale is (C)
    Tensor* dbias = Target(2, &dbias_scratch_);    // dbias is (C)
    dscale->Resize({channels});
    dbias->Resize({channels});
    if (x.numel() == 0) {  // an empty batch contributes nothing
      dscale->Zero();
      dbias->Zero();
      return;
    }

    cuda::CudaContext& context = cuda::ContextFor(device().id);
    cudaStream_t stream = context.stream();
    inv_std_.PlaceOn(device());
    inv_std_.Resize({channels});  // inv_std is (C)
    InverseStdKernel<<<BlocksFor(channels), kThreads, 0, stream>>>(
        channels, epsilon_, saved_var.data<float>(), inv_std_.data<float>());
    LOCKSTEP_CUDA_CHECK_LAUNCH();
    if (is_test_) {
      DispatchFloating(def_, x.dtype(), [&](auto zero) {
        using T = decltype(zero);
        const int64_t batch = x.dim(0), spatial = x.numel() / (batch * channels);
        FixedStatisticsGradientKernel<<<static_cast<unsigned>(std::min<int64_t>(channels, 65535)), kThreads,
                                        0, stream>>>(
            static_cast<const T*>(x.raw_data()), static_cast<const T*>(dy.raw_data()), scale.data<float>(),
            saved_mean.data<float>(), inv_std_.data<float>(), batch, channels, spatial,
            dx ? static_cast<T*>(dx->raw_data()) : nullptr, dscale->data<float>(), dbias->data<float>());
        LOCKSTEP_CUDA_CHECK_LAUNCH();
      });
      return;
    }

    // Activation-sized scratch from the device's workspace, in slots of x's size: dY through the ReLU mask,
    // and dX when it is not an output.
    const size_t slot = (x.nbytes() + 255) / 256 * 256;
    const int slots = (relu_ ? 1 : 0) + (dx ? 0 : 1);
    uint8_t* scratch = slots > 0 ? static_cast<uint8_t*>(context.Workspace(slots * slot)) : nullptr;
    const void* dy_data = dy.raw_data();
    if (relu_) {
      DispatchFloating(def_, x.dtype(), [&](auto zero) {
        using T = decltype(zero);
        MaskGradientKernel<<<BlocksFor(x.numel()), kThreads, 0, stream>>>(
            static_cast<const T*>(dy.raw_data()), mask, reinterpret_cast<T*>(scratch), x.numel());
        LOCKSTEP_CUDA_CHECK_LAUNCH();
      });
      dy_data = scratch;
    }
    void* dx_data = dx ? dx->raw_data() : scratch + (relu_ ? slot : 0);
    desc_.Describe(def_, x);
    LOCKSTEP_CUDNN_CHECK(cudnnBatchNormalizationBackward(
        context.cudnn(), kMode, &kOne, &kZero, &kOne, &kZero, desc_.x(), x.raw_data(), desc_.x(), dy_data,
        desc_.x(), dx_data, desc_.channel(), scale.raw_data(), dscale->raw_data(), dbias->raw_data(),
        epsilon_, saved_mean.raw_data(), inv_std_.raw_data()));
  }

 private:
  // The mask SpatialBN wrote for this X (one byte per element on CUDA devices).
  const uint8_t* CheckedMask(const Tensor& mask, const Tensor& x) const {
    if (mask.dtype() != DataType::kUInt8 || mask.numel() != x.numel())
      FailOperator(
          def_,
          fmt::format("the mask must be the {} uint8 bytes SpatialBN wrote for X {}, got {} {}", x.numel(),
                      ShapeToString(x.shape()), DataTypeName(mask.dtype()), ShapeToString(mask.shape())));
    return mask.data<uint8_t>();
  }

  // The output for gradient `which`, or null when that gradient is not wanted.
  Tensor* Wanted(int which) { return output_of_[which] >= 0 ? Output(output_of_[which]) : nullptr; }

  // The output for gradient `which`, or `scratch` (in this device's memory) when it is not wanted.
  Tensor* Target(int which, Tensor* scratch) {
    if (Tensor* output = Wanted(which)) return output;
    scratch->PlaceOn(device());
    return scratch;
  }

  const bool is_test_;
  const float epsilon_;
  const bool relu_;
  const std::array<int, 3> output_of_;  // per gradient (dX, dscale, dbias): its output, or -1
  BatchNormDescriptors desc_;
  Tensor inv_std_;                         // 1 / sqrt(saved_var + epsilon), as cuDNN takes it
  Tensor dscale_scratch_, dbias_scratch_;  // for the per-channel gradients that are not outputs
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(SpatialBN, CudnnSpatialBNOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(SpatialBNGradient, CudnnSpatialBNGradientOp);

}  // namespace lockstep
