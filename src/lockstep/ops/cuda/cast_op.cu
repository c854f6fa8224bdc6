// Cast on CUDA devices: float32 <-> float16 / bfloat16 with the hardware's round-to-nearest-even conversions,
// which the CPU op (ops/cast_op.cc) reproduces bit for bit.
#include "lockstep/core/operator.h"
#include "lockstep/cuda/cuda_context.h"
#include "lockstep/ops/cuda/cuda_kernels.cuh"

namespace lockstep {
namespace {

// x and y are (n).
template <typename From, typename To>
__global__ void CastKernel(const From* x, To* y, int64_t n) {
  LOCKSTEP_KERNEL_LOOP(i, n) { cuda::StoreFloat(y, i, cuda::LoadFloat(x, i)); }
}

bool Castable(DataType type) {
  return type == DataType::kFloat || type == DataType::kFloat16 || type == DataType::kBFloat16;
}

class CudaCastOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& x = Input(0);  // x is any shape: float32, float16 or bfloat16
    if (InputSize() == 1 && !HasArgument(def_, "to"))
      FailOperator(def_, "needs the target dtype: arg to or input 1");
    const DataType to = InputSize() == 2 ? Input(1).dtype() : static_cast<DataType>(IntArg("to"));
    if (!Castable(x.dtype()) || !Castable(to))
      FailOperator(def_, fmt::format("cannot cast {} to {}; on CUDA devices Cast converts float32, float16 "
                                     "and bfloat16 (integers on CPUs)",
                                     DataTypeName(x.dtype()), DataTypeName(to)));
    Tensor* y = Output(0);  // y has x's shape, dtype `to`
    if (to == x.dtype()) return y->CopyFrom(x);
    y->Resize(x.shape(), to);
    if (x.numel() == 0) return;
    cudaStream_t stream = cuda::ContextFor(device().id).stream();
    cuda::DispatchFloating(def_, x.dtype(), [&](auto from_type) {
      cuda::DispatchFloating(def_, to, [&](auto to_type) {
        using From = decltype(from_type);
        using To = decltype(to_type);
        CastKernel<<<cuda::BlocksFor(x.numel()), cuda::kThreads, 0, stream>>>(
            static_cast<const From*>(x.raw_data()), static_cast<To*>(y->raw_data()), x.numel());
        LOCKSTEP_CUDA_CHECK_LAUNCH();
      });
    });
  }
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(Cast, CudaCastOp);

}  // namespace lockstep
