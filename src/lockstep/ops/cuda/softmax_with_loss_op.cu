// SoftmaxWithLoss and SoftmaxWithLossGradient on CUDA devices, as ops/softmax_with_loss_op.cc defines them:
// softmax over the classes (row max subtracted), the mean cross-entropy of the labelled class as a float32
// scalar, and the gradient (softmax - onehot) * dloss * scale / N. Logits may be float32, float16 or
// bfloat16; the kernels compute in float32 and sum the loss in double, as the CPU does.
#include <algorithm>
#include <cub/block/block_reduce.cuh>
#include <cuda/functional>

#include "lockstep/core/operator.h"
#include "lockstep/cuda/cuda_context.h"
#include "lockstep/ops/class_labels.h"
#include "lockstep/ops/cuda/cuda_kernels.cuh"

namespace lockstep {
namespace {

// Probabilities below this count as this, so a confidently wrong row costs -log(1e-20) = 46 rather than inf.
constexpr float kMinProbability = 1e-20f;

// Softmax of each row into softmax, and the row's cross-entropy -log(max(p[label], kMinProbability)) into
// row_loss (0 for a label outside [0, D), which LossKernel reports). A block works on one row at a time.
// logits and softmax are (N, D); labels and row_loss are (N).
template <typename T>
__global__ void SoftmaxKernel(const T* logits, const int32_t* labels, int64_t n, int64_t d, T* softmax,
                              float* row_loss) {
  using BlockReduce = cub::BlockReduce<float, cuda::kThreads>;
  __shared__ typename BlockReduce::TempStorage storage;
  __shared__ float row_max, row_sum;
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    const T* x = logits + row * d;
    float local_max = -INFINITY;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) local_max = fmaxf(local_max, cuda::LoadFloat(x, j));
    const float block_max = BlockReduce(storage).Reduce(local_max, ::cuda::maximum<>{});
    if (threadIdx.x == 0) row_max = block_max;
    __syncthreads();  // row_max is visible, and the storage free again
    float local_sum = 0.0f;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) local_sum += expf(cuda::LoadFloat(x, j) - row_max);
    const float block_sum = BlockReduce(storage).Sum(local_sum);
    if (threadIdx.x == 0) row_sum = block_sum;
    __syncthreads();
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
      cuda::StoreFloat(softmax + row * d, j, expf(cuda::LoadFloat(x, j) - row_max) / row_sum);
    if (threadIdx.x == 0) {
      const int32_t label = labels[row];
      const bool valid = label >= 0 && label < d;
      const float p = valid ? expf(cuda::LoadFloat(x, label) - row_max) / row_sum : 1.0f;
      row_loss[row] = valid ? -logf(fmaxf(p, kMinProbability)) : 0.0f;
    }
    __syncthreads();  // the next row reuses row_max, row_sum and the storage
  }
}

// loss = mean(row_loss) * scale, summed in double; first_bad = the first row whose label is outside [0, D),
// or -1. One block. labels and row_loss are (N); loss and first_bad are scalars.
__global__ void LossKernel(const float* row_loss, const int32_t* labels, int64_t n, int64_t d, float scale,
                           float* loss, int64_t* first_bad) {
  using SumReduce = cub::BlockReduce<double, cuda::kThreads>;
  using MinReduce = cub::BlockReduce<int64_t, cuda::kThreads>;
  __shared__ typename SumReduce::TempStorage sum_storage;
  __shared__ typename MinReduce::TempStorage min_storage;
  double total = 0;
  int64_t bad = n;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    total += row_loss[i];
    if ((labels[i] < 0 || labels[i] >= d) && bad == n) bad = i;
  }
  total = SumReduce(sum_storage).Sum(total);
  bad = MinReduce(min_storage).Reduce(bad, ::cuda::minimum<>{});
  if (threadIdx.x == 0) {
    *loss = static_cast<float>(total / n * scale);
    *first_bad = bad < n ? bad : -1;
  }
}

// dlogits = (softmax - onehot(label)) * dloss * scale / N, with the CPU's float arithmetic. softmax and
// dlogits are (N, D), labels is (N), dloss a scalar. A label outside [0, D) (which the forward op reported)
// contributes no onehot.
template <typename T>
__global__ void SoftmaxWithLossGradientKernel(const T* softmax, const int32_t* labels, const float* dloss,
                                              int64_t n, int64_t d, float scale, T* dlogits) {
  const float factor = *dloss * scale / n;
  LOCKSTEP_KERNEL_LOOP(i, n * d) {
    float g = cuda::LoadFloat(softmax, i);
    if (i % d == labels[i / d]) g -= 1.0f;
    cuda::StoreFloat(dlogits, i, g * factor);
  }
}

class CudaSoftmaxWithLossOp : public Operator {
 public:
  CudaSoftmaxWithLossOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), scale_(FloatArg("scale")) {}

  void Run() override {
    const Tensor& logits = Input(0);  // logits is (N, D)
    const Tensor& labels = Input(1);  // labels is (N) or (N, 1), int32 in [0, D)
    CheckSoftmaxWithLossShapes(def_, logits.shape(), labels.shape(), labels.dtype());
    Tensor* softmax = Output(0);  // softmax is (N, D), logits' dtype
    Tensor* loss = Output(1);     // loss is a float32 scalar
    softmax->Resize(logits.shape(), logits.dtype());
    loss->Resize({});
    const int64_t n = logits.dim(0), d = logits.dim(1);
    cuda::CudaContext& context = cuda::ContextFor(device().id);
    cudaStream_t stream = context.stream();
    row_loss_.PlaceOn(device());
    row_loss_.Resize({n});
    first_bad_.PlaceOn(device());
    first_bad_.Resize({}, DataType::kInt64);
    cuda::DispatchFloating(def_, logits.dtype(), [&](auto zero) {
      using T = decltype(zero);
      SoftmaxKernel<<<static_cast<unsigned>(std::min<int64_t>(n, 65535)), cuda::kThreads, 0, stream>>>(
          static_cast<const T*>(logits.raw_data()), labels.data<int32_t>(), n, d,
          static_cast<T*>(softmax->raw_data()), row_loss_.data<float>());
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    });
    LossKernel<<<1, cuda::kThreads, 0, stream>>>(row_loss_.data<float>(), labels.data<int32_t>(), n, d,
                                                 scale_, loss->data<float>(), first_bad_.data<int64_t>());
    LOCKSTEP_CUDA_CHECK_LAUNCH();

    // A label outside [0, D) is an error the CPU reports here, so the host waits for the check's result.
    int64_t first_bad = -1;
    LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(&first_bad, first_bad_.data<int64_t>(), sizeof first_bad,
                                        cudaMemcpyDeviceToHost, stream));
    context.Synchronize();
    if (first_bad < 0) return;
    int32_t label = 0;
    LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(&label, labels.data<int32_t>() + first_bad, sizeof label,
                                        cudaMemcpyDeviceToHost, stream));
    context.Synchronize();  // the message names the label
    FailOperator(def_, fmt::format("label {} of row {} is outside [0, {}); labels must index the {} classes",
                                   label, first_bad, d, d));
  }

 private:
  const float scale_;
  Tensor row_loss_;   // (N) float32: each row's cross-entropy
  Tensor first_bad_;  // int64 scalar: the first row with a bad label, or -1
};

class CudaSoftmaxWithLossGradientOp : public Operator {
 public:
  CudaSoftmaxWithLossGradientOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), scale_(FloatArg("scale")) {}

  void Run() override {
    const Tensor& logits = Input(0);   // logits is (N, D)
    const Tensor& labels = Input(1);   // labels is (N) or (N, 1)
    const Tensor& softmax = Input(2);  // softmax is (N, D), logits' dtype
    const Tensor& dloss = Input(3);    // dloss is a float32 scalar
    CheckSoftmaxWithLossGradientInputs(def_, logits, labels, softmax, dloss);
    if (softmax.dtype() != logits.dtype() || dloss.dtype() != DataType::kFloat)
      FailOperator(def_,
                   fmt::format("softmax must have the logits' dtype {} and dloss be float32, got {} and {}",
                               DataTypeName(logits.dtype()), DataTypeName(softmax.dtype()),
                               DataTypeName(dloss.dtype())));
    Tensor* dlogits = Output(0);  // dlogits is (N, D), logits' dtype
    dlogits->Resize(logits.shape(), logits.dtype());
    const int64_t n = logits.dim(0), d = logits.dim(1);
    if (n * d == 0) return;
    cudaStream_t stream = cuda::ContextFor(device().id).stream();
    cuda::DispatchFloating(def_, logits.dtype(), [&](auto zero) {
      using T = decltype(zero);
      SoftmaxWithLossGradientKernel<<<cuda::BlocksFor(n * d), cuda::kThreads, 0, stream>>>(
          static_cast<const T*>(softmax.raw_data()), labels.data<int32_t>(), dloss.data<float>(), n, d,
          scale_, static_cast<T*>(dlogits->raw_data()));
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    });
  }

 private:
  const float scale_;
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(SoftmaxWithLoss, CudaSoftmaxWithLossOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(SoftmaxWithLossGradient, CudaSoftmaxWithLossGradientOp);

}  // namespace lockstep
