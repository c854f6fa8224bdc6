// MaxPool, AveragePool (global_pooling included) and their gradients on CUDA devices with cuDNN pooling, with
// the arguments, checks and count_include_pad semantics of the CPU operators (ops/pool_op.cc). cuDNN pads
// opposite sides equally, so unequal pads are an error here. Unlike the CPU's, the gradients read Y: cuDNN
// finds each window's maximum by comparing X with it.
#include <utility>

#include "lockstep/core/operator.h"
#include "lockstep/cuda/cuda_context.h"
#include "lockstep/ops/conv_pool_args.h"
#include "lockstep/ops/cuda/cudnn_utils.h"

namespace lockstep {
namespace {

using cuda::kOne;
using cuda::kZero;
using PoolingDescriptor = cuda::CudnnDescriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor,
                                                cudnnDestroyPoolingDescriptor>;

enum class PoolKind { kMax, kAverage };

// The window arguments with the CPU operator's checks, and the one cuDNN adds.
ConvPoolArgs ParseCudnnPoolArgs(const OperatorDef& def) {
  ConvPoolArgs args = ParsePoolArgs(def);
  if (args.pad_t != args.pad_b || args.pad_l != args.pad_r)
    FailOperator(def, fmt::format("pads (t {}, l {}, b {}, r {}) differ between opposite sides, which cuDNN "
                                  "cannot do on CUDA devices; give equal pad_t/pad_b and pad_l/pad_r",
                                  args.pad_t, args.pad_l, args.pad_b, args.pad_r));
  return args;
}

// cuDNN's descriptors of one pooling over an x of (N, C, H, W), for the shape and dtype last described.
class PoolSetup {
 public:
  PoolSetup(const OperatorDef& def, PoolKind kind) : args_(ParseCudnnPoolArgs(def)) {
    // Caffe2's count_include_pad=0 divides each window by its non-padding elements.
    mode_ = kind == PoolKind::kMax                  ? CUDNN_POOLING_MAX_DETERMINISTIC
            : IntArg(def, "count_include_pad") != 0 ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                    : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  }

  // Checks x and describes it, y and the window when they changed; returns y's shape (N, C, OH, OW).
  const Shape& Describe(const OperatorDef& def, const Tensor& x) {
    if (x.shape() == x_shape_ && x.dtype() == type_) return y_shape_;
    type_ = DataType::kUndefined;  // until the descriptors below all match the new shape
    cuda::CudnnDataType(def, "X", x.dtype());
    const ConvPoolArgs window = PoolWindow(def, args_, x.shape());
    Shape y_shape = PoolOutputShape(def, window, x.shape());
    if (x.numel() > 0) {  // cuDNN takes no empty tensors, and there is nothing to pool
      cuda::SetTensorDescriptor(def, x_desc_.get(), x.dtype(), x.shape());
      cuda::SetTensorDescriptor(def, y_desc_.get(), x.dtype(), y_shape);
      LOCKSTEP_CUDNN_CHECK(cudnnSetPooling2dDescriptor(
          pool_desc_.get(), mode_, CUDNN_PROPAGATE_NAN, static_cast<int>(window.kernel_h),
          static_cast<int>(window.kernel_w), static_cast<int>(window.pad_t), static_cast<int>(window.pad_l),
          static_cast<int>(window.stride_h), static_cast<int>(window.stride_w)));
    }
    y_shape_ = std::move(y_shape);
    x_shape_ = x.shape();
    type_ = x.dtype();
    return y_shape_;
  }

  cudnnPoolingDescriptor_t pool() const { return pool_desc_.get(); }
  cudnnTensorDescriptor_t x() const { return x_desc_.get(); }
  cudnnTensorDescriptor_t y() const { return y_desc_.get(); }

 private:
  const ConvPoolArgs args_;
  cudnnPoolingMode_t mode_;
  Shape x_shape_, y_shape_;
  DataType type_ = DataType::kUndefined;
  cuda::TensorDescriptor x_desc_, y_desc_;
  PoolingDescriptor pool_desc_;
};

template <PoolKind kKind>
class CudnnPoolOp : public Operator {
 public:
  CudnnPoolOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws), setup_(def, kKind) {}

  void Run() override {
    const Tensor& x = Input(0);  // x is (N, C, H, W)
    const Shape& y_shape = setup_.Describe(def_, x);
    Tensor* y = Output(0);  // y is (N, C, OH, OW), x's dtype
    y->Resize(y_shape, x.dtype());
    if (x.numel() == 0) return;
    LOCKSTEP_CUDNN_CHECK(cudnnPoolingForward(cuda::ContextFor(device().id).cudnn(), setup_.pool(), &kOne,
                                             setup_.x(), x.raw_data(), &kZero, setup_.y(), y->raw_data()));
  }

 private:
  PoolSetup setup_;
};

// (X, Y, dY) -> dX as in Caffe2.
template <PoolKind kKind>
class CudnnPoolGradientOp : public Operator {
 public:
  CudnnPoolGradientOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws), setup_(def, kKind) {}

  void Run() override {
    const Tensor& x = Input(0);   // x is (N, C, H, W)
    const Tensor& y = Input(1);   // y is the forward output (N, C, OH, OW)
    const Tensor& dy = Input(2);  // dy has y's shape
    const Shape& y_shape = setup_.Describe(def_, x);
    if (dy.shape() != y_shape)
      FailOperator(def_, fmt::format("dY is {} but the pooling output is {}", ShapeToString(dy.shape()),
                                     ShapeToString(y_shape)));
    if (y.shape() != y_shape)
      FailOperator(def_, fmt::format("Y is {} but the pooling output is {}", ShapeToString(y.shape()),
                                     ShapeToString(y_shape)));
    for (int i : {1, 2})
      if (Input(i).dtype() != x.dtype())
        FailOperator(def_,
                     fmt::format("input '{}' is {} but X is {}; the inputs must have one dtype", InputName(i),
                                 DataTypeName(Input(i).dtype()), DataTypeName(x.dtype())));
    Tensor* dx = Output(0);  // dx has x's shape and dtype
    dx->Resize(x.shape(), x.dtype());
    if (x.numel() == 0) return;
    LOCKSTEP_CUDNN_CHECK(cudnnPoolingBackward(cuda::ContextFor(device().id).cudnn(), setup_.pool(), &kOne,
                                              setup_.y(), y.raw_data(), setup_.y(), dy.raw_data(), setup_.x(),
                                              x.raw_data(), &kZero, setup_.x(), dx->raw_data()));
  }

 private:
  PoolSetup setup_;
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(MaxPool, CudnnPoolOp<PoolKind::kMax>);
LOCKSTEP_REGISTER_CUDA_OPERATOR(AveragePool, CudnnPoolOp<PoolKind::kAverage>);
LOCKSTEP_REGISTER_CUDA_OPERATOR(MaxPoolGradient, CudnnPoolGradientOp<PoolKind::kMax>);
LOCKSTEP_REGISTER_CUDA_OPERATOR(AveragePoolGradient, CudnnPoolGradientOp<PoolKind::kAverage>);

}  // namespace lockstep
