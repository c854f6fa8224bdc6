// Element-wise ops on CUDA devices, as ops/elementwise_ops.cc defines them: Add (with suffix broadcasting),
// Sum, Scale and SumReduceLike. float32, float16 and bfloat16, computed in float32.
#include <algorithm>

#include "lockstep/core/operator.h"
#include "lockstep/cuda/cuda_context.h"
#include "lockstep/ops/cuda/cuda_kernels.cuh"
#include "lockstep/ops/elementwise_ops.h"

namespace lockstep {
namespace {

// a and c are (n), b is (inner) and repeats along a (inner == n without broadcast). c may be a or b. With
// relu, c = max(a + b, 0).
template <typename T>
__global__ void AddKernel(const T* a, const T* b, T* c, int64_t n, int64_t inner, bool relu) {
  LOCKSTEP_KERNEL_LOOP(i, n) {
    const float sum = cuda::LoadFloat(a, i) + cuda::LoadFloat(b, i % inner);
    cuda::StoreFloat(c, i, relu ? fmaxf(sum, 0.0f) : sum);
  }
}

// Sums run in chunks of this many inputs, passed by value to the kernel.
constexpr int kSumChunk = 16;

template <typename T>
struct SumChunk {
  const T* x[kSumChunk];
  int count;
};

// Each x[j] and y are (n); y = (accumulate ? y : 0) + x[0] + x[1] + ..., added left to right in float32 like
// the CPU's sum. y may be one of this chunk's inputs.
template <typename T>
__global__ void SumKernel(SumChunk<T> chunk, T* y, int64_t n, bool accumulate) {
  LOCKSTEP_KERNEL_LOOP(i, n) {
    float sum = accumulate ? cuda::LoadFloat(y, i) : 0.0f;
    for (int j = 0; j < chunk.count; ++j) sum += cuda::LoadFloat(chunk.x[j], i);
    cuda::StoreFloat(y, i, sum);
  }
}

// x and y are (n); y may be x.
template <typename T>
__global__ void ScaleKernel(const T* x, T* y, int64_t n, float scale) {
  LOCKSTEP_KERNEL_LOOP(i, n) { cuda::StoreFloat(y, i, scale * cuda::LoadFloat(x, i)); }
}

// dy is (outer, inner), db is (inner): each thread owns columns, so reads of a row are coalesced.
template <typename T>
__global__ void SumReduceLikeKernel(const T* dy, T* db, int64_t outer, int64_t inner) {
  LOCKSTEP_KERNEL_LOOP(j, inner) {
    float sum = 0.0f;
    for (int64_t o = 0; o < outer; ++o) sum += cuda::LoadFloat(dy, o * inner + j);
    cuda::StoreFloat(db, j, sum);
  }
}

cudaStream_t StreamOf(const Device& device) { return cuda::ContextFor(device.id).stream(); }

void CheckSameDtype(const OperatorDef& def, int i, const Tensor& x, const Tensor& first) {
  if (x.dtype() != first.dtype())
    FailOperator(def,
                 fmt::format("input '{}' is {} but '{}' is {}; the inputs must share a dtype", def.input(i),
                             DataTypeName(x.dtype()), def.input(0), DataTypeName(first.dtype())));
}

class CudaAddOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& a = Input(0);  // a is any shape
    const Tensor& b = Input(1);  // b is a's shape, or a suffix of it with broadcast=1
    Shape shape = AddShape(def_, a.shape(), b.shape());
    CheckSameDtype(def_, 1, b, a);
    CheckAddInPlace(def_, IsInplace(1, 0), a.shape(), b.shape());
    Tensor* c = Output(0);  // c has a's shape and dtype
    c->Resize(shape, a.dtype());
    if (c->numel() == 0) return;
    // Each element is read before it is written, so C may be A or B.
    cuda::DispatchFloating(def_, a.dtype(), [&](auto type) {
      using T = decltype(type);
      const int64_t n = c->numel();
      AddKernel<<<cuda::BlocksFor(n), cuda::kThreads, 0, StreamOf(device())>>>(
          static_cast<const T*>(a.raw_data()), static_cast<const T*>(b.raw_data()),
          static_cast<T*>(c->raw_data()), n, b.numel(), IntArg("relu") != 0);
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    });
  }
};

class CudaSumOp : public Operator {
 public:
  CudaSumOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws), input_tensors_(InputSize()) {}

  void Run() override {
    // Each Input() call may stage a copy, so each input is fetched once.
    for (int i = 0; i < InputSize(); ++i) input_tensors_[i] = &Input(i);
    const Tensor& x0 = *input_tensors_[0];  // every input has x0's shape and dtype
    for (int i = 1; i < InputSize(); ++i) {
      CheckSumInput(def_, i, input_tensors_[i]->shape(), x0.shape());
      CheckSameDtype(def_, i, *input_tensors_[i], x0);
    }
    Tensor* y = Output(0);  // y has x0's shape; it may be x0 itself
    y->Resize(x0.shape(), x0.dtype());
    if (y->numel() == 0) return;
    cuda::DispatchFloating(def_, x0.dtype(), [&](auto type) {
      using T = decltype(type);
      const int64_t n = y->numel();
      // Only x0 may be y (the schema's in-place rule), and x0 is in the first chunk, which reads all its
      // inputs before writing; later chunks add to y.
      for (int first = 0; first < InputSize(); first += kSumChunk) {
        SumChunk<T> chunk{};
        chunk.count = std::min(kSumChunk, InputSize() - first);
        for (int j = 0; j < chunk.count; ++j)
          chunk.x[j] = static_cast<const T*>(input_tensors_[first + j]->raw_data());
        SumKernel<<<cuda::BlocksFor(n), cuda::kThreads, 0, StreamOf(device())>>>(
            chunk, static_cast<T*>(y->raw_data()), n, first > 0);
        LOCKSTEP_CUDA_CHECK_LAUNCH();
      }
    });
  }

 private:
  std::vector<const Tensor*> input_tensors_;
};

// y = scale * x; with scale 1 it is the copy that gradients of Add and Sum use.
class CudaScaleOp : public Operator {
 public:
  CudaScaleOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws), scale_(FloatArg("scale")) {}

  void Run() override {
    const Tensor& x = Input(0);  // x is any shape
    Tensor* y = Output(0);       // y has x's shape and dtype; it may be x
    y->Resize(x.shape(), x.dtype());
    if (x.numel() == 0) return;
    cuda::DispatchFloating(def_, x.dtype(), [&](auto type) {
      using T = decltype(type);
      ScaleKernel<<<cuda::BlocksFor(x.numel()), cuda::kThreads, 0, StreamOf(device())>>>(
          static_cast<const T*>(x.raw_data()), static_cast<T*>(y->raw_data()), x.numel(), scale_);
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    });
  }

 private:
  float scale_;
};

// dB of a broadcast Add: sums dY over the leading dims that B lacks.
class CudaSumReduceLikeOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& dy = Input(0);  // dy is (outer, inner) once flattened
    const Tensor& b = Input(1);   // b's shape is a suffix of dy's: (inner)
    CheckSumReduceLikeShapes(def_, dy.shape(), b.shape());
    Tensor* db = Output(0);  // db has b's shape and dy's dtype
    db->Resize(b.shape(), dy.dtype());
    if (db->numel() == 0) return;
    const int64_t inner = b.numel();
    cuda::DispatchFloating(def_, dy.dtype(), [&](auto type) {
      using T = decltype(type);
      SumReduceLikeKernel<<<cuda::BlocksFor(inner), cuda::kThreads, 0, StreamOf(device())>>>(
          static_cast<const T*>(dy.raw_data()), static_cast<T*>(db->raw_data()), dy.numel() / inner, inner);
      LOCKSTEP_CUDA_CHECK_LAUNCH();
    });
  }
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(Add, CudaAddOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(Sum, CudaSumOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(Scale, CudaScaleOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(SumReduceLike, CudaSumReduceLikeOp);

}  // namespace lockstep
