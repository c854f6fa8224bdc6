// Relu: y = max(x, 0), and LeakyRelu (Caffe2's): y = x > 0 ? x : alpha * x with arg alpha >= 0; Relu is
// LeakyRelu with alpha 0. Their gradients dx = dy * (y > 0 ? 1 : alpha) read y, so all may run
// in place. All keep the layout their input comes in (eltwise_op.h). SumReluGradient is a Sum of partial
// gradients and the ReluGradient that reads it, in one pass (parallel/fuse_relu.h makes it).
#include <algorithm>

#include "lockstep/core/gradient.h"
#include "lockstep/ops/eltwise_op.h"
#include "lockstep/ops/relu_mask.h"

namespace lockstep {

namespace {

// dx[i] = (parts[0][i] + parts[1][i] + ...) * (y[i] > 0 ? 1 : 0), each part an array of T, added left to
// right in float32 and rounded once, as Sum and then ReluGradient compute it. Blocks of a few KiB keep the
// partial sums in L1.
template <typename T>
void SumWherePositive(const T* y, const std::vector<const void*>& parts, T* dx, int64_t n) {
  constexpr int64_t kBlock = 1024;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kBlock, count = std::min(kBlock, n - begin);
    float sum[kBlock];
    const T* first = static_cast<const T*>(parts[0]) + begin;
    for (int64_t i = 0; i < count; ++i) sum[i] = Widen(first[i]);
    for (size_t k = 1; k < parts.size(); ++k) {
      const T* part = static_cast<const T*>(parts[k]) + begin;
      for (int64_t i = 0; i < count; ++i) sum[i] += Widen(part[i]);
    }
    for (int64_t i = 0; i < count; ++i) dx[begin + i] = Narrow<T>(WherePositive(Widen(y[begin + i]), sum[i]));
  }
}

class SumReluGradientOp : public Operator {
 public:
  SumReluGradientOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws) { AcceptLayouts(); }

  void Run() override {
    const Tensor& y = Input(0);  // y is any shape, any layout; every dY has its shape, any layout
    if (y.dtype() != DataType::kFloat && y.dtype() != DataType::kBFloat16)
      FailOperator(def_, fmt::format("Y is {}; SumReluGradient computes in float32 or bfloat16",
                                     DataTypeName(y.dtype())));
    const dnnl::memory::desc desc = DescOf(y);
    // The dYs in Y's layout and dtype (reordered into scratch where they differ), before sizing dX, which may
    // be one of them.
    parts_.clear();
    for (int i = 1; i < InputSize(); ++i) {
      if (Input(i).shape() != y.shape())
        FailOperator(def_,
                     fmt::format("input '{}' is {} but Y '{}' is {}; every dY needs Y's shape", InputName(i),
                                 ShapeToString(Input(i).shape()), InputName(0), ShapeToString(y.shape())));
      parts_.push_back(ReorderIfNeeded(AsMemory(Input(i)), desc, i - 1).get_data_handle());
    }
    dnnl::memory dx = ResizeForDesc(Output(0), y.shape(), desc);
    if (y.numel() == 0) return;
    const int64_t n = static_cast<int64_t>(desc.get_size() / ElementSize(y.dtype()));  // padding included
    auto run = [&](auto type) {
      using T = decltype(type);
      SumWherePositive(static_cast<const T*>(AsMemory(y).get_data_handle()), parts_,
                       static_cast<T*>(dx.get_data_handle()), n);
    };
    if (y.dtype() == DataType::kFloat)
      run(float{});
    else
      run(BFloat16{});
  }

 private:
  std::vector<const void*> parts_;  // kept between runs, so that a step allocates nothing
};

constexpr auto kRelu = dnnl::algorithm::eltwise_relu;
// With alpha >= 0, y > 0 exactly where x > 0, so the gradient can be computed from y.
constexpr auto kReluFromOutput = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;

class LeakyReluOp : public EltwiseOp {
 public:
  LeakyReluOp(const OperatorDef& def, Workspace* ws)
      : EltwiseOp(def, ws, kRelu, lockstep::FloatArg(def, "alpha")) {}
};

class LeakyReluGradientOp : public EltwiseGradientOp {
 public:
  LeakyReluGradientOp(const OperatorDef& def, Workspace* ws)
      : EltwiseGradientOp(def, ws, kReluFromOutput, lockstep::FloatArg(def, "alpha")) {}
};

void DeclareLeakyReluGradient(OpSchema& schema) {
  schema.Include(DeclareEltwiseGradientFromOutput).ArgsOf("LeakyRelu");  // alpha
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(Relu)
    .SetDoc("Y = max(X, 0), element-wise, in X's layout; may run in place.")
    .Include(DeclareEltwiseInPlace);
LOCKSTEP_OPERATOR_SCHEMA(ReluGradient)
    .SetDoc("dX = dY where Y > 0, else 0: Relu's gradient, computed from its output.")
    .Include(DeclareEltwiseGradientFromOutput);
LOCKSTEP_OPERATOR_SCHEMA(SumReluGradient)
    .SetDoc(
        "dX = (dY0 + dY1 + ...) where Y > 0, else 0: a Sum of partial gradients and the ReluGradient that "
        "reads it, in one pass and with the same bits; in Y's layout and dtype.")
    .Input(0, "Y", "Relu's output, any layout")
    .Input(1, "dY...", "Y's shape, each in any layout")
    .Output(0, "dX", "Y's shape and layout; may be the first dY")
    .NumInputs(2, INT_MAX)
    .AllowInplace({{1, 0}})
    .IdentityShape();
LOCKSTEP_OPERATOR_SCHEMA(LeakyRelu)
    .SetDoc("Y = X > 0 ? X : alpha * X, element-wise (Caffe2's LeakyRelu); may run in place.")
    .Include(DeclareEltwiseInPlace)
    .Arg("alpha", ArgType::kFloat, 0.01f,
         "slope for X < 0; not negative, since the gradient is computed from Y, which needs Y > 0 exactly "
         "where X > 0")
    .Min(0);
LOCKSTEP_OPERATOR_SCHEMA(LeakyReluGradient)
    .SetDoc("dX = dY * (Y > 0 ? 1 : alpha): LeakyRelu's gradient, computed from its output.")
    .Include(DeclareLeakyReluGradient);
LOCKSTEP_REGISTER_CPU_OPERATOR(Relu, Eltwise<kRelu>);
LOCKSTEP_REGISTER_CPU_OPERATOR(ReluGradient, EltwiseGradient<kReluFromOutput>);
LOCKSTEP_REGISTER_CPU_OPERATOR(SumReluGradient, SumReluGradientOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(LeakyRelu, LeakyReluOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(LeakyReluGradient, LeakyReluGradientOp);
LOCKSTEP_REGISTER_GRADIENT(Relu, EltwiseGradientFromOutput);
LOCKSTEP_REGISTER_GRADIENT(LeakyRelu, EltwiseGradientFromOutput);

}  // namespace lockstep
