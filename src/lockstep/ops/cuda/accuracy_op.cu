// Accuracy on CUDA devices, as ops/accuracy_op.cc defines it: the fraction of rows whose label is among the
// top_k scores, where a label counts when fewer than top_k scores are strictly greater than its own.
// Predictions may be float32, float16 or bfloat16; labels outside [0, D) are reported as on the CPU.
#include <algorithm>
#include <cub/block/block_reduce.cuh>
#include <cuda/functional>

#include "lockstep/core/operator.h"
#include "lockstep/cuda/cuda_context.h"
#include "lockstep/ops/class_labels.h"
#include "lockstep/ops/cuda/cuda_kernels.cuh"

namespace lockstep {
namespace {

using cuda::DispatchFloating;
using cuda::kThreads;
using cuda::LoadFloat;

// correct[row] = 1 when fewer than top_k scores of the row exceed its label's, else 0 (also for a label
// outside [0, D), which AccuracyKernel reports). A block works on one row at a time. scores is (N, D); labels
// and correct are (N).
template <typename T>
__global__ void RowCorrectKernel(const T* scores, const int32_t* labels, int64_t n, int64_t d, int64_t top_k,
                                 int32_t* correct) {
  using BlockReduce = cub::BlockReduce<int64_t, kThreads>;
  __shared__ typename BlockReduce::TempStorage storage;
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    const int32_t label = labels[row];
    const bool valid = label >= 0 && label < d;
    const T* x = scores + row * d;
    const float own = valid ? LoadFloat(x, label) : 0.0f;
    int64_t greater = 0;
    for (int64_t j = threadIdx.x; valid && j < d; j += blockDim.x) greater += LoadFloat(x, j) > own;
    const int64_t total = BlockReduce(storage).Sum(greater);
    if (threadIdx.x == 0) correct[row] = valid && total < top_k;
    __syncthreads();  // the next row reuses the storage
  }
}

// accuracy = sum(correct) / N (0 for an empty batch); bad = {the first row whose label is outside [0, D), its
// label}, or {-1, 0}. One block. labels and correct are (N); accuracy is a scalar, bad is (2).
__global__ void AccuracyKernel(const int32_t* correct, const int32_t* labels, int64_t n, int64_t d,
                               float* accuracy, int64_t* bad) {
  using BlockReduce = cub::BlockReduce<int64_t, kThreads>;
  __shared__ typename BlockReduce::TempStorage storage;
  int64_t count = 0, first_bad = n;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    count += correct[i];
    if ((labels[i] < 0 || labels[i] >= d) && first_bad == n) first_bad = i;
  }
  count = BlockReduce(storage).Sum(count);
  __syncthreads();  // the second reduction reuses the storage
  first_bad = BlockReduce(storage).Reduce(first_bad, ::cuda::minimum<>{});
  if (threadIdx.x == 0) {
    *accuracy = n > 0 ? static_cast<float>(count) / n : 0.0f;
    bad[0] = first_bad < n ? first_bad : -1;
    bad[1] = first_bad < n ? labels[first_bad] : 0;
  }
}

class CudaAccuracyOp : public Operator {
 public:
  CudaAccuracyOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws), top_k_(IntArg("top_k")) {}

  void Run() override {
    const Tensor& predictions = Input(0);  // predictions is (N, D): scores or probabilities
    const Tensor& labels = Input(1);       // labels is (N) or (N, 1), int32 in [0, D)
    CheckClassLabelShapes(def_, "predictions", predictions.shape(), labels.shape(), labels.dtype());
    Tensor* accuracy = Output(0);  // accuracy is a float32 scalar in [0, 1]
    accuracy->Resize({});
    const int64_t n = predictions.dim(0), d = predictions.dim(1);
    cuda::CudaContext& context = cuda::ContextFor(device().id);
    cudaStream_t stream = context.stream();
    correct_.PlaceOn(device());
    correct_.Resize({n}, DataType::kInt32);
    bad_.PlaceOn(device());
    bad_.Resize({2}, DataType::kInt64);
    DispatchFloating(def_, predictions.dtype(), [&](auto zero) {
      using T = decltype(zero);
      RowCorrectKernel<<<static_cast<unsigned>(std::clamp<int64_t>(n, 1, 65535)), kThreads, 0, stream>>>(
          static_cast<const T*>(predictions.raw_data()), labels.data<int32_t>(), n, d, top_k_,
          correct_.data<int32_t>());
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    });
    AccuracyKernel<<<1, kThreads, 0, stream>>>(correct_.data<int32_t>(), labels.data<int32_t>(), n, d,
                                               accuracy->data<float>(), bad_.data<int64_t>());
    LOCKSTEP_CUDA_CHECK_LAUNCH();

    // A label outside [0, D) is an error the CPU reports here, so the host waits for the check's result.
    int64_t bad[2];
    LOCKSTEP_CUDA_CHECK(
        cudaMemcpyAsync(bad, bad_.data<int64_t>(), sizeof bad, cudaMemcpyDeviceToHost, stream));
    context.Synchronize();
    if (bad[0] >= 0)
      FailOperator(
          def_, fmt::format("label {} of row {} is outside [0, {}); labels must index the {} classes", bad[1],
                            bad[0], d, d));
  }

 private:
  const int64_t top_k_;
  Tensor correct_;  // (N) int32: 1 where the row's label is among its top_k scores
  Tensor bad_;      // (2) int64: the first row with a bad label and that label, or -1
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(Accuracy, CudaAccuracyOp);

}  // namespace lockstep
