// FC and FCGradient on CUDA devices, as ops/fc_op.cc defines them (Y = X W^T + b, X flattened to (N, K) at
// `axis`, W (M, K)), on cuBLAS's GemmEx: float32, float16 or bfloat16 tensors with float32 accumulation.
// enable_tensor_core=1 lets float32 products run on TF32 tensor cores; float16_compute=1 accumulates float16
// tensors in float16.
//
// Row-major and column-major. Our matrices are row-major; cuBLAS reads column-major. A row-major (r, c)
// matrix with leading dimension c is, byte for byte, the column-major (c, r) matrix: its transpose. So every
// product below is written for the transposes, which cuBLAS sees without any copy:
//   forward   Y = X W^T   is   Y^T (M, N) = W (M, K) X^T (K, N):
//             A = w seen as W^T (K, M), taken transposed; B = x seen as X^T (K, N), as is;
//   bias      Y^T (M, N) = b (M, 1) ones^T (1, N), before the product, which then adds to it (beta = 1);
//   dW = dY^T X   is   dW^T (K, M) = X^T (K, N) dY (N, M):
//             A = x seen as X^T, as is; B = dy seen as dY^T (M, N), taken transposed;
//   db = dY^T ones   is   db (M, 1) = dY^T (M, N) ones (N, 1): A = dy seen as dY^T, as is;
//   dX = dY W   is   dX^T (K, N) = W^T (K, M) dY^T (M, N): A = w seen as W^T, B = dy seen as dY^T, as is.
// The bias terms use a vector of N ones kept on the device, so that every step is a GEMM and the file needs
// no kernel of its own.
#include "lockstep/ops/fc_op.h"

#include <algorithm>

#include "lockstep/core/half.h"
#include "lockstep/core/operator.h"
#include "lockstep/cuda/cuda_context.h"
#include "lockstep/ops/weight_gradient.h"

namespace lockstep {
namespace {

// How one FC op multiplies: the element type of all its tensors and the accumulation cuBLAS uses.
class Gemm {
 public:
  // Checks that the inputs share a dtype cuBLAS can multiply; picks the accumulation from the options.
  Gemm(const OperatorDef& def, const std::vector<const Tensor*>& inputs) : type_(inputs[0]->dtype()) {
    for (size_t i = 1; i < inputs.size(); ++i)
      if (inputs[i]->dtype() != type_)
        FailOperator(def,
                     fmt::format("'{}' is {} but '{}' is {}; the inputs must share a dtype", def.input(i),
                                 DataTypeName(inputs[i]->dtype()), def.input(0), DataTypeName(type_)));
    switch (type_) {
      case DataType::kFloat:
        data_ = CUDA_R_32F;
        break;
      case DataType::kFloat16:
        data_ = CUDA_R_16F;
        break;
      case DataType::kBFloat16:
        data_ = CUDA_R_16BF;
        break;
      default:
        FailOperator(def,
                     fmt::format("{} tensors are not supported on CUDA; use float32, float16 or bfloat16",
                                 DataTypeName(type_)));
    }
    // As Conv does: float16_compute=1 (--float16_compute) accumulates float16 data in float16, and other
    // dtypes in float32 (the trainer's evaluation net runs in float32 with the same options).
    if (type_ == DataType::kFloat16 && IntArg(def, kFloat16ComputeArg) != 0) {
      compute_ = CUBLAS_COMPUTE_16F;  // alpha and beta are then float16 too
      one_ = &kOne16;
      zero_ = &kZero16;
    } else if (type_ == DataType::kFloat && IntArg(def, kTensorCoreArg) != 0) {
      // 16-bit inputs use tensor cores with float32 accumulation anyway; float32 needs leave to round its
      // inputs to TF32.
      compute_ = CUBLAS_COMPUTE_32F_FAST_TF32;
    }
  }

  DataType type() const { return type_; }

  // C (m, n) = op(A) op(B) [+ C when accumulate], all column-major in this dtype; op(A) is (m, k), op(B) is
  // (k, n), and C is dense (ldc = m).
  void Multiply(cuda::CudaContext& context, cublasOperation_t op_a, cublasOperation_t op_b, int64_t m,
                int64_t n, int64_t k, const void* a, int64_t lda, const void* b, int64_t ldb, bool accumulate,
                void* c) const {
    if (m == 0 || n == 0) return;
    if (k == 0) {  // an empty product adds nothing (and cuBLAS would refuse leading dimensions of 0)
      if (!accumulate)
        LOCKSTEP_CUDA_CHECK(
            cudaMemsetAsync(c, 0, static_cast<size_t>(m * n) * ElementSize(type_), context.stream()));
      return;
    }
    cublasHandle_t handle = context.cublas();
    // The handle is shared by the device's ops; these calls need host scalars and no math-mode override.
    LOCKSTEP_CUBLAS_CHECK(cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_HOST));
    LOCKSTEP_CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));
    LOCKSTEP_CUBLAS_CHECK(cublasGemmEx_64(handle, op_a, op_b, m, n, k, one_, a, data_, lda, b, data_, ldb,
                                          accumulate ? one_ : zero_, c, data_, m, compute_,
                                          CUBLAS_GEMM_DEFAULT));
  }

 private:
  static constexpr float kOne = 1.0f, kZero = 0.0f;
  static inline const Float16 kOne16 = ToFloat16(1.0f), kZero16 = ToFloat16(0.0f);

  DataType type_;
  cudaDataType data_ = CUDA_R_32F;
  cublasComputeType_t compute_ = CUBLAS_COMPUTE_32F;
  const void* one_ = &kOne;  // alpha and beta, in the compute type's scale type
  const void* zero_ = &kZero;
};

// A device vector of n ones in a dtype, rebuilt only when n or the dtype changes.
class Ones {
 public:
  const void* Get(int64_t n, DataType type, const Device& device) {
    if (ones_.defined() && ones_.numel() == n && ones_.dtype() == type) return ones_.raw_data();
    Tensor host({n}, type);
    switch (type) {
      case DataType::kFloat16:
        std::fill_n(host.data<Float16>(), n, ToFloat16(1.0f));
        break;
      case DataType::kBFloat16:
        std::fill_n(host.data<BFloat16>(), n, ToBFloat16(1.0f));
        break;
      default:
        std::fill_n(host.data<float>(), n, 1.0f);
    }
    ones_.PlaceOn(device);
    ones_.CopyFrom(host);
    return ones_.raw_data();
  }

 private:
  Tensor ones_;
};

class CudaFcOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& x = Input(0);  // x is (N, K), or any shape that flattens to it at `axis`
    const Tensor& w = Input(1);  // w is (M, K)
    const Tensor& b = Input(2);  // b is (M)
    if (x.shape() != x_shape_ || w.shape() != w_shape_ || b.shape() != b_shape_) {
      shapes_ = FcOutputShape(def_, x.shape(), w.shape(), &b.shape());
      x_shape_ = x.shape();
      w_shape_ = w.shape();
      b_shape_ = b.shape();
    }
    const Gemm gemm(def_, {&x, &w, &b});
    Tensor* y = Output(0);  // y is x.shape[:axis] + (M), x's dtype
    y->Resize(shapes_.y, gemm.type());
    if (y->numel() == 0) return;
    const int64_t n = shapes_.n, k = shapes_.k, m = shapes_.m;
    cuda::CudaContext& context = cuda::ContextFor(device().id);
    const void* ones = ones_.Get(n, gemm.type(), device());
    // Y^T (M, N) = b ones^T, then += W X^T (see the top of the file).
    gemm.Multiply(context, CUBLAS_OP_N, CUBLAS_OP_N, m, n, 1, b.raw_data(), m, ones, 1, false, y->raw_data());
    gemm.Multiply(context, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, w.raw_data(), k, x.raw_data(), k, true,
                  y->raw_data());
  }

 private:
  Shape x_shape_, w_shape_, b_shape_;
  FcShapes shapes_;
  Ones ones_;
};

class CudaFcGradientOp : public Operator {
 public:
  CudaFcGradientOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), wants_(ParseWeightGradientOutputs(def)) {}

  void Run() override {
    const Tensor& x = Input(0);   // x is (N, K), or any shape that flattens to it at `axis`
    const Tensor& w = Input(1);   // w is (M, K)
    const Tensor& dy = Input(2);  // dy is x.shape[:axis] + (M)
    if (x.shape() != x_shape_ || w.shape() != w_shape_ || dy.shape() != dy_shape_) {
      shapes_ = FcGradientShapes(def_, x.shape(), w.shape(), dy.shape());
      x_shape_ = x.shape();
      w_shape_ = w.shape();
      dy_shape_ = dy.shape();
    }
    const Gemm gemm(def_, {&x, &w, &dy});
    // dw is (M, K), db is (M), dx has x's shape
    auto [dw, db, dx] = SelectWeightGradients(wants_, [this](int i) { return Output(i); });
    if (dw) dw->Resize(w.shape(), gemm.type());
    if (db) db->Resize({w.dim(0)}, gemm.type());
    if (dx) dx->Resize(x.shape(), gemm.type());
    const int64_t n = shapes_.n, k = shapes_.k, m = shapes_.m;
    if (n == 0) {  // an empty batch contributes nothing
      if (dw) dw->Zero();
      if (db) db->Zero();
      return;
    }
    cuda::CudaContext& context = cuda::ContextFor(device().id);
    // dW^T (K, M) = X^T dY; db (M) = dY^T ones; dX^T (K, N) = W^T dY^T (see the top of the file).
    if (dw)
      gemm.Multiply(context, CUBLAS_OP_N, CUBLAS_OP_T, k, m, n, x.raw_data(), k, dy.raw_data(), m, false,
                    dw->raw_data());
    if (db)
      gemm.Multiply(context, CUBLAS_OP_N, CUBLAS_OP_N, m, 1, n, dy.raw_data(), m,
                    ones_.Get(n, gemm.type(), device()), n, false, db->raw_data());
    if (dx)
      gemm.Multiply(context, CUBLAS_OP_N, CUBLAS_OP_N, k, n, m, w.raw_data(), k, dy.raw_data(), m, false,
                    dx->raw_data());
  }

 private:
  const WeightGradientOutputs wants_;
  Shape x_shape_, w_shape_, dy_shape_;
  FcShapes shapes_;
  Ones ones_;
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(FC, CudaFcOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(FCGradient, CudaFcGradientOp);

}  // namespace lockstep
