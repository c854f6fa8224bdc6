// Conv and ConvGradient on CUDA devices with cuDNN, with the inputs, outputs, arguments and checks of the CPU
// operators (ops/conv_op.cc). Each pass's algorithm is the fastest that cuDNN times (cudnnFind*AlgorithmEx)
// within arg ws_nbytes_limit bytes of workspace, the first time a shape is seen; the choice is kept per
// shape.
#include <map>
#include <utility>
#include <vector>

#include "lockstep/core/operator.h"
#include "lockstep/cuda/cuda_context.h"
#include "lockstep/ops/conv_pool_args.h"
#include "lockstep/ops/cuda/channel_sums.h"
#include "lockstep/ops/cuda/cudnn_utils.h"
#include "lockstep/ops/weight_gradient.h"

namespace lockstep {
namespace {

using cuda::kOne;
using cuda::kZero;
using ConvolutionDescriptor =
    cuda::CudnnDescriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                          cudnnDestroyConvolutionDescriptor>;

// More than any pass has algorithms.
constexpr int kMaxSearchResults = 16;

// An algorithm chosen for one shape, and what running it takes.
template <typename Algorithm>
struct AlgorithmChoice {
  Algorithm algorithm;
  size_t workspace_bytes;
  cudnnMathType_t math_type;  // the math type cuDNN timed it with
};

// The fastest of a search's results (cuDNN returns them fastest first) that ran within the workspace limit.
template <typename Perf>
AlgorithmChoice<decltype(Perf::algo)> Fastest(const OperatorDef& def, const char* pass, DataType type,
                                              const Perf* results, int count, size_t limit) {
  for (int i = 0; i < count; ++i)
    if (results[i].status == CUDNN_STATUS_SUCCESS && results[i].memory <= limit)
      return {results[i].algo, results[i].memory, results[i].mathType};
  FailOperator(def, fmt::format("cuDNN has no {} algorithm for {} data of these shapes that fits "
                                "ws_nbytes_limit = {} bytes; raise --cudnn_workspace_limit_mb",
                                pass, DataTypeName(type), limit));
}

// What Conv and ConvGradient share: the arguments, the cuDNN descriptors of the shapes last seen and the
// algorithms chosen per shape.
class CudnnConvOpBase : public Operator {
 public:
  CudnnConvOpBase(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws),
        args_(ParseConvPoolArgs(def)),
        group_(IntArg("group")),
        workspace_limit_(IntArg(kCudnnWorkspaceArg)),
        tensor_core_(IntArg(kTensorCoreArg) != 0),
        float16_compute_(IntArg(kFloat16ComputeArg) != 0) {
    if (args_.pad_t != args_.pad_b || args_.pad_l != args_.pad_r)
      FailOperator(def,
                   fmt::format("pads (t {}, l {}, b {}, r {}) differ between opposite sides, which cuDNN "
                               "cannot do on CUDA devices; give equal pad_t/pad_b and pad_l/pad_r",
                               args_.pad_t, args_.pad_l, args_.pad_b, args_.pad_r));
    if (workspace_limit_ < 0)
      FailOperator(def, fmt::format("ws_nbytes_limit must be non-negative, got {}", workspace_limit_));
  }

 protected:
  // Checks x, the filter and the bias shape (when given) against each other, describes them to cuDNN when
  // they changed since the last run, and returns y's shape.
  const Shape& Describe(const Tensor& x, const Tensor& filter, const Shape* bias) {
    CheckType(filter, 1, x.dtype());
    if (x.shape() == x_shape_ && filter.shape() == filter_shape_ && x.dtype() == type_ &&
        (bias ? *bias : Shape()) == bias_shape_)
      return y_shape_;
    type_ = DataType::kUndefined;  // until the descriptors below all match the new shapes
    const cudnnDataType_t data_type = cuda::CudnnDataType(def_, "X", x.dtype());
    Shape y_shape = ConvOutputShape(def_, args_, group_, x.shape(), filter.shape(), bias);
    // cuDNN takes no empty tensors: an empty y needs no work, and an empty x only y's and the bias's.
    if (NumElements(y_shape) > 0) {
      cuda::SetTensorDescriptor(def_, y_desc_.get(), x.dtype(), y_shape);
      cuda::SetTensorDescriptor(def_, bias_desc_.get(), x.dtype(), {1, filter.dim(0), 1, 1});
    }
    if (NumElements(y_shape) > 0 && x.numel() > 0) {
      cuda::SetTensorDescriptor(def_, x_desc_.get(), x.dtype(), x.shape());
      const Shape& f = filter.shape();
      LOCKSTEP_CUDNN_CHECK(cudnnSetFilter4dDescriptor(filter_desc_.get(), data_type, CUDNN_TENSOR_NCHW,
                                                      static_cast<int>(f[0]), static_cast<int>(f[1]),
                                                      static_cast<int>(f[2]), static_cast<int>(f[3])));
      LOCKSTEP_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
          conv_desc_.get(), static_cast<int>(args_.pad_t), static_cast<int>(args_.pad_l),
          static_cast<int>(args_.stride_h), static_cast<int>(args_.stride_w),
          static_cast<int>(args_.dilation_h), static_cast<int>(args_.dilation_w), CUDNN_CROSS_CORRELATION,
          ComputeType(x.dtype())));
      LOCKSTEP_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv_desc_.get(), static_cast<int>(group_)));
    }
    y_shape_ = std::move(y_shape);
    x_shape_ = x.shape();
    filter_shape_ = filter.shape();
    bias_shape_ = bias ? *bias : Shape();
    type_ = x.dtype();
    key_ = x_shape_;
    key_.insert(key_.end(), filter_shape_.begin(), filter_shape_.end());
    key_.push_back(static_cast<int64_t>(type_));
    return y_shape_;
  }

  // Input `input` must have X's dtype.
  void CheckType(const Tensor& tensor, int input, DataType x_type) const {
    if (tensor.dtype() != x_type)
      FailOperator(def_, fmt::format("input '{}' is {} but X is {}; the inputs must have one dtype",
                                     InputName(input), DataTypeName(tensor.dtype()), DataTypeName(x_type)));
  }

  // The choice for the current shape from `choices`; the first time, `find(results, capacity, &count,
  // workspace, workspace_bytes)` runs cuDNN's timed search with the configured math type.
  template <typename Perf, typename Find>
  const AlgorithmChoice<decltype(Perf::algo)>& Choose(
      std::map<Shape, AlgorithmChoice<decltype(Perf::algo)>>& choices, const char* pass,
      cuda::CudaContext& context, Find&& find) {
    auto known = choices.find(key_);
    if (known != choices.end()) return known->second;
    LOCKSTEP_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_.get(), MathType()));
    const size_t limit = static_cast<size_t>(workspace_limit_);
    void* workspace = limit > 0 ? context.Workspace(limit) : nullptr;
    Perf results[kMaxSearchResults];
    int count = 0;
    find(results, kMaxSearchResults, &count, workspace, limit);
    return choices.emplace(key_, Fastest(def_, pass, type_, results, count, limit)).first->second;
  }

  // Sets the descriptor up to run `choice`; returns its workspace.
  template <typename Algorithm>
  void* Prepare(const AlgorithmChoice<Algorithm>& choice, cuda::CudaContext& context) {
    LOCKSTEP_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_.get(), choice.math_type));
    return choice.workspace_bytes > 0 ? context.Workspace(choice.workspace_bytes) : nullptr;
  }

  const ConvPoolArgs args_;
  const int64_t group_;
  const int64_t workspace_limit_;
  cuda::TensorDescriptor x_desc_, y_desc_, bias_desc_;
  cuda::FilterDescriptor filter_desc_;
  ConvolutionDescriptor conv_desc_;

 private:
  cudnnMathType_t MathType() const {
    if (tensor_core_) return CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    // cuDNN's default math lets float32 convolutions run in TF32 on Ampere and later GPUs; FMA math keeps
    // them in float32, as on the CPU.
    return type_ == DataType::kFloat ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
  }

  // float16_compute=1 (--float16_compute) accumulates float16 data in float16; everything else in float32.
  cudnnDataType_t ComputeType(DataType type) const {
    return type == DataType::kFloat16 && float16_compute_ ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
  }

  const bool tensor_core_;
  const bool float16_compute_;
  Shape x_shape_, filter_shape_, bias_shape_, y_shape_;
  DataType type_ = DataType::kUndefined;
  Shape key_;  // x's shape, the filter's shape and the dtype: what the algorithm choices depend on
};

class CudnnConvOp : public CudnnConvOpBase {
 public:
  CudnnConvOp(const OperatorDef& def, Workspace* ws) : CudnnConvOpBase(def, ws) {
    if (IntArg("relu") != 0)
      FailOperator(def, "relu=1 runs on CPUs only; on a CUDA device put a Relu after the Conv");
  }

  void Run() override {
    const Tensor& x = Input(0);                                   // x is (N, C, H, W)
    const Tensor& filter = Input(1);                              // filter is (M, C/group, kh, kw)
    const Tensor* bias = InputSize() == 3 ? &Input(2) : nullptr;  // bias is (M)
    if (bias) CheckType(*bias, 2, x.dtype());
    const Shape& y_shape = Describe(x, filter, bias ? &bias->shape() : nullptr);
    Tensor* y = Output(0);  // y is (N, M, OH, OW), x's dtype
    y->Resize(y_shape, x.dtype());
    if (y->numel() == 0) return;

    cuda::CudaContext& context = cuda::ContextFor(device().id);
    cudnnHandle_t cudnn = context.cudnn();
    if (x.numel() == 0) {  // the windows cover padding alone (an input of zero height, width or channels)
      y->Zero();
    } else {
      Convolve(x, filter, y, context);
    }
    if (bias)
      LOCKSTEP_CUDNN_CHECK(cudnnAddTensor(cudnn, &kOne, bias_desc_.get(), bias->raw_data(), &kOne,
                                          y_desc_.get(), y->raw_data()));
  }

 private:
  void Convolve(const Tensor& x, const Tensor& filter, Tensor* y, cuda::CudaContext& context) {
    cudnnHandle_t cudnn = context.cudnn();
    const auto& choice = Choose<cudnnConvolutionFwdAlgoPerf_t>(
        choices_, "forward", context,
        [&](cudnnConvolutionFwdAlgoPerf_t* results, int capacity, int* count, void* workspace, size_t bytes) {
          LOCKSTEP_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
              cudnn, x_desc_.get(), x.raw_data(), filter_desc_.get(), filter.raw_data(), conv_desc_.get(),
              y_desc_.get(), y->raw_data(), capacity, count, results, workspace, bytes));
        });
    void* workspace = Prepare(choice, context);
    LOCKSTEP_CUDNN_CHECK(cudnnConvolutionForward(
        cudnn, &kOne, x_desc_.get(), x.raw_data(), filter_desc_.get(), filter.raw_data(), conv_desc_.get(),
        choice.algorithm, workspace, choice.workspace_bytes, &kZero, y_desc_.get(), y->raw_data()));
  }

  std::map<Shape, AlgorithmChoice<cudnnConvolutionFwdAlgo_t>> choices_;
};

class CudnnConvGradientOp : public CudnnConvOpBase {
 public:
  CudnnConvGradientOp(const OperatorDef& def, Workspace* ws)
      : CudnnConvOpBase(def, ws), wants_(ParseWeightGradientOutputs(def)) {}

  void Run() override {
    const Tensor& x = Input(0);       // x is (N, C, H, W)
    const Tensor& filter = Input(1);  // filter is (M, C/group, kh, kw)
    const Tensor& dy = Input(2);      // dy is (N, M, OH, OW)
    CheckType(dy, 2, x.dtype());
    const Shape& y_shape = Describe(x, filter, nullptr);
    if (dy.shape() != y_shape)
      FailOperator(def_, fmt::format("dY is {} but the convolution output is {}", ShapeToString(dy.shape()),
                                     ShapeToString(y_shape)));
    // dfilter has filter's shape, dbias is (M), dx has x's shape
    auto [dfilter, dbias, dx] = SelectWeightGradients(wants_, [this](int i) { return Output(i); });
    if (dfilter) dfilter->Resize(filter.shape(), x.dtype());
    if (dbias) dbias->Resize({filter.dim(0)}, x.dtype());
    if (dx) dx->Resize(x.shape(), x.dtype());
    if (dy.numel() == 0) {  // an empty batch, or no filters, contributes nothing
      for (Tensor* gradient : {dfilter, dbias, dx})
        if (gradient) gradient->Zero();
      return;
    }

    cuda::CudaContext& context = cuda::ContextFor(device().id);
    cudnnHandle_t cudnn = context.cudnn();
    if (dbias) cuda::SumPerChannel(def_, context, dy, dbias);
    if (x.numel() == 0) {  // the windows covered padding alone: the filter met only zeros, dx is empty
      if (dfilter) dfilter->Zero();
      return;
    }
    if (dfilter) {
      const auto& choice = Choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
          filter_choices_, "backward-filter", context,
          [&](cudnnConvolutionBwdFilterAlgoPerf_t* results, int capacity, int* count, void* workspace,
              size_t bytes) {
            LOCKSTEP_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
                cudnn, x_desc_.get(), x.raw_data(), y_desc_.get(), dy.raw_data(), conv_desc_.get(),
                filter_desc_.get(), dfilter->raw_data(), capacity, count, results, workspace, bytes));
          });
      void* workspace = Prepare(choice, context);
      LOCKSTEP_CUDNN_CHECK(cudnnConvolutionBackwardFilter(cudnn, &kOne, x_desc_.get(), x.raw_data(),
                                                          y_desc_.get(), dy.raw_data(), conv_desc_.get(),
                                                          choice.algorithm, workspace, choice.workspace_bytes,
                                                          &kZero, filter_desc_.get(), dfilter->raw_data()));
    }
    if (dx) {
      const auto& choice = Choose<cudnnConvolutionBwdDataAlgoPerf_t>(
          data_choices_, "backward-data", context,
          [&](cudnnConvolutionBwdDataAlgoPerf_t* results, int capacity, int* count, void* workspace,
              size_t bytes) {
            LOCKSTEP_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
                cudnn, filter_desc_.get(), filter.raw_data(), y_desc_.get(), dy.raw_data(), conv_desc_.get(),
                x_desc_.get(), dx->raw_data(), capacity, count, results, workspace, bytes));
          });
      void* workspace = Prepare(choice, context);
      LOCKSTEP_CUDNN_CHECK(cudnnConvolutionBackwardData(
          cudnn, &kOne, filter_desc_.get(), filter.raw_data(), y_desc_.get(), dy.raw_data(), conv_desc_.get(),
          choice.algorithm, workspace, choice.workspace_bytes, &kZero, x_desc_.get(), dx->raw_data()));
    }
  }

 private:
  const WeightGradientOutputs wants_;
  std::map<Shape, AlgorithmChoice<cudnnConvolutionBwdFilterAlgo_t>> filter_choices_;
  std::map<Shape, AlgorithmChoice<cudnnConvolutionBwdDataAlgo_t>> data_choices_;
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(Conv, CudnnConvOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(ConvGradient, CudnnConvGradientOp);

}  // namespace lockstep
