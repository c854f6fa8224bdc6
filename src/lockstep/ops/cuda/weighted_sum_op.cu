// WeightedSum on CUDA devices: y = sum_i w_i * x_i over pairs (x_i, w_i), float32, with the weights read on
// the device so that a weight computed on the GPU (a learning rate) needs no host round trip.
#include <algorithm>

#include "lockstep/core/operator.h"
#include "lockstep/cuda/cuda_context.h"
#include "lockstep/ops/cuda/cuda_kernels.cuh"
#include "lockstep/ops/weighted_sum_op.h"

namespace lockstep {
namespace {

// Pairs are summed in chunks of this many, passed by value to the kernel.
constexpr int kPairChunk = 8;

struct PairChunk {
  const float* x[kPairChunk];
  const float* w[kPairChunk];  // each a single float
  int count;
};

// Each x[j] and y are (n). y = (accumulate ? y : 0) + w[0] x[0] + w[1] x[1] + ..., with the CPU's rounding:
// a product, then a sum, each rounded (no fused multiply-add), left to right; the first pair's term is
// stored as is. y may be x[0] of the first chunk, which is read before y is written.
__global__ void WeightedSumKernel(PairChunk chunk, float* y, int64_t n, bool accumulate) {
  LOCKSTEP_KERNEL_LOOP(i, n) {
    float sum = accumulate ? y[i] : __fmul_rn(*chunk.w[0], chunk.x[0][i]);
    for (int j = accumulate ? 0 : 1; j < chunk.count; ++j)
      sum = __fadd_rn(sum, __fmul_rn(*chunk.w[j], chunk.x[j][i]));
    y[i] = sum;
  }
}

class CudaWeightedSumOp : public Operator {
 public:
  CudaWeightedSumOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws), input_tensors_(InputSize()) {
    CheckWeightedSumArity(def);
  }

  void Run() override {
    // Each Input() call may stage a copy, so each input is fetched once.
    for (int i = 0; i < InputSize(); ++i) input_tensors_[i] = &Input(i);
    const Tensor& x0 = *input_tensors_[0];  // every x_i has x0's shape
    for (int i = 0; i < InputSize(); i += 2)
      CheckWeightedSumPair(def_, i, *input_tensors_[i], *input_tensors_[i + 1], x0);
    Tensor* y = Output(0);  // y has x0's shape; it may be x0 (only)
    y->Resize(x0.shape());
    const int64_t n = x0.numel();
    if (n == 0) return;
    cudaStream_t stream = cuda::ContextFor(device().id).stream();
    const int pairs = InputSize() / 2;
    for (int first = 0; first < pairs; first += kPairChunk) {
      PairChunk chunk{};
      chunk.count = std::min(kPairChunk, pairs - first);
      for (int j = 0; j < chunk.count; ++j) {
        chunk.x[j] = input_tensors_[2 * (first + j)]->data<float>();
        chunk.w[j] = input_tensors_[2 * (first + j) + 1]->data<float>();
      }
      WeightedSumKernel<<<cuda::BlocksFor(n), cuda::kThreads, 0, stream>>>(chunk, y->data<float>(), n,
                                                                           first > 0);
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    }
  }

 private:
  std::vector<const Tensor*> input_tensors_;
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(WeightedSum, CudaWeightedSumOp);

}  // namespace lockstep
