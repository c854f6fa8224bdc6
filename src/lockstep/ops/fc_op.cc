// FC: Y = X W^T + b, with X flattened to (N, K) at `axis` and W in Caffe2's (M, K) layout, and
// FCGradient(X, W, dY) -> [dW], [db], [dX] (see weight_gradient.h), on oneDNN's inner product: its GEMM
// kernels on plain layouts beat matmul here. Primitives are built once per input shape.
#include "lockstep/ops/fc_op.h"

#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/dnnl_utils.h"
#include "lockstep/ops/weight_gradient.h"

namespace lockstep {

FcShapes FcOutputShape(const OperatorDef& def, const Shape& x, const Shape& w, const Shape* b) {
  int ndim = static_cast<int>(x.size());
  int64_t axis = IntArg(def, "axis");
  if (axis < 0) axis += ndim;
  if (axis < 0 || axis >= ndim)
    FailOperator(def,
                 fmt::format("axis {} is out of range for input {}", IntArg(def, "axis"), ShapeToString(x)));
  FcShapes s;
  s.y.assign(x.begin(), x.begin() + axis);
  s.n = NumElements(s.y);
  s.k = NumElements(Shape(x.begin() + axis, x.end()));
  if (w.size() != 2 || w[1] != s.k)
    FailOperator(def, fmt::format("W must be (M, {}) to match input {} flattened at axis {}, got {}", s.k,
                                  ShapeToString(x), axis, ShapeToString(w)));
  s.m = w[0];
  if (b && (b->size() != 1 || (*b)[0] != s.m))
    FailOperator(def, fmt::format("b must be ({}), got {}", s.m, ShapeToString(*b)));
  s.y.push_back(s.m);
  return s;
}

FcShapes FcGradientShapes(const OperatorDef& def, const Shape& x, const Shape& w, const Shape& dy) {
  FcShapes shapes = FcOutputShape(def, x, w, nullptr);
  if (dy != shapes.y)
    FailOperator(def,
                 fmt::format("dY is {} but the FC output is {}", ShapeToString(dy), ShapeToString(shapes.y)));
  return shapes;
}

namespace {

using dnnl::memory;

// Plain oneDNN descriptions of one FC shape: x (N, K), w (M, K), b (M), y (N, M). The product is in X's
// dtype (float32, or bfloat16 with float32 accumulation), which W must share; b is float32 or X's dtype.
struct FcSetup {
  FcShapes shapes;
  memory::desc x, w, b, y;
  dnnl::inner_product_forward::primitive_desc forward;
};

FcSetup MakeFcSetup(const OperatorDef& def, const FcShapes& shapes, DataType x_type, DataType w_type,
                    DataType b_type) {
  if (w_type != x_type)
    FailOperator(def, fmt::format("W is {} but X is {}; give both the same dtype", DataTypeName(w_type),
                                  DataTypeName(x_type)));
  FcSetup s;
  s.shapes = shapes;
  s.x = PlainDesc({s.shapes.n, s.shapes.k}, x_type);
  s.w = PlainDesc({s.shapes.m, s.shapes.k}, x_type);
  s.b = PlainDesc({s.shapes.m}, b_type);
  s.y = PlainDesc({s.shapes.n, s.shapes.m}, x_type);
  if (s.shapes.n > 0)
    s.forward = dnnl::inner_product_forward::primitive_desc(CpuEngine(), dnnl::prop_kind::forward_training,
                                                            s.x, s.w, s.b, s.y);
  return s;
}

class FcOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& x = Input(0);  // x is (N, K), or any shape that flattens to it at `axis`
    const Tensor& w = Input(1);  // w is (M, K)
    const Tensor& b = Input(2);  // b is (M)
    Tensor* y = Output(0);       // y is x.shape[:axis] + (M), in x's dtype
    if (!signature_.Matches({&x, &w, &b})) {
      setup_ = MakeFcSetup(def_, FcOutputShape(def_, x.shape(), w.shape(), &b.shape()), x.dtype(), w.dtype(),
                           b.dtype());
      signature_.Record({&x, &w, &b});
      if (setup_.shapes.n > 0) primitive_ = dnnl::inner_product_forward(setup_.forward);
    }
    y->Resize(setup_.shapes.y, x.dtype());
    if (setup_.shapes.n == 0) return;
    Execute(primitive_, {{DNNL_ARG_SRC, ToMemory(x, setup_.x)},
                         {DNNL_ARG_WEIGHTS, ToMemory(w, setup_.w)},
                         {DNNL_ARG_BIAS, ToMemory(b, setup_.b)},
                         {DNNL_ARG_DST, ToMemory(*y, setup_.y)}});
  }

 private:
  Signature signature_;
  FcSetup setup_;
  dnnl::inner_product_forward primitive_;
};

class FcGradientOp : public Operator {
 public:
  FcGradientOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), wants_(ParseWeightGradientOutputs(def)) {}

  void Run() override {
    const Tensor& x = Input(0);   // x is (N, K), or any shape that flattens to it at `axis`
    const Tensor& w = Input(1);   // w is (M, K)
    const Tensor& dy = Input(2);  // dy is x.shape[:axis] + (M)
    // dw is (M, K), in w's dtype; db is (M), float32; dx has x's shape and dtype
    auto [dw, db, dx] = SelectWeightGradients(wants_, [this](int i) { return Output(i); });
    if (!signature_.Matches({&x, &w, &dy})) Setup(x, w, dy);
    if (dw) dw->Resize(w.shape(), w.dtype());
    if (db) db->Resize({w.dim(0)});
    if (dx) dx->Resize(x.shape(), x.dtype());
    if (setup_.shapes.n == 0) {  // an empty batch contributes nothing
      if (dw) dw->Zero();
      if (db) db->Zero();
      return;
    }
    memory dy_memory = ToMemory(dy, setup_.y);
    if (weights_primitive_) {
      std::unordered_map<int, memory> args{
          {DNNL_ARG_SRC, ToMemory(x, setup_.x)},
          {DNNL_ARG_DIFF_DST, dy_memory},
          // Without a dW output the primitive still writes one.
          {DNNL_ARG_DIFF_WEIGHTS, dw ? ToMemory(*dw, setup_.w) : ScratchMemory(setup_.w, 0)}};
      if (db) args[DNNL_ARG_DIFF_BIAS] = ToMemory(*db, setup_.b);
      Execute(weights_primitive_, args);
    }
    if (data_primitive_)
      Execute(data_primitive_, {{DNNL_ARG_DIFF_DST, dy_memory},
                                {DNNL_ARG_WEIGHTS, ToMemory(w, setup_.w)},
                                {DNNL_ARG_DIFF_SRC, ToMemory(*dx, setup_.x)}});
  }

 private:
  void Setup(const Tensor& x, const Tensor& w, const Tensor& dy) {
    if (dy.dtype() != x.dtype())
      FailOperator(def_, fmt::format("dY is {} but X is {}; give both the same dtype",
                                     DataTypeName(dy.dtype()), DataTypeName(x.dtype())));
    setup_ = MakeFcSetup(def_, FcGradientShapes(def_, x.shape(), w.shape(), dy.shape()), x.dtype(), w.dtype(),
                         DataType::kFloat);
    signature_.Record({&x, &w, &dy});
    if (setup_.shapes.n == 0) return;
    if (wants_.dweight || wants_.dbias) {
      using WeightsDesc = dnnl::inner_product_backward_weights::primitive_desc;
      weights_primitive_ = dnnl::inner_product_backward_weights(
          wants_.dbias ? WeightsDesc(CpuEngine(), setup_.x, setup_.w, setup_.b, setup_.y, setup_.forward)
                       : WeightsDesc(CpuEngine(), setup_.x, setup_.w, setup_.y, setup_.forward));
    }
    if (wants_.dx) {
      data_primitive_ = dnnl::inner_product_backward_data(dnnl::inner_product_backward_data::primitive_desc(
          CpuEngine(), setup_.x, setup_.w, setup_.y, setup_.forward));
    }
  }

  const WeightGradientOutputs wants_;
  Signature signature_;
  FcSetup setup_;
  dnnl::inner_product_backward_weights weights_primitive_;
  dnnl::inner_product_backward_data data_primitive_;
};

std::vector<TensorShape> FcShape(const OperatorDef& def, const std::vector<TensorShape>& in) {
  return {{FcOutputShape(def, in[0].dims, in[1].dims, &in[2].dims).y, in[0].dtype}};
}

// A dW that only db is wanted beside (slot 0): the weights pass writes both.
std::vector<size_t> FcGradientScratch(const OperatorDef& def, const std::vector<TensorShape>& in) {
  const WeightGradientOutputs wants = ParseWeightGradientOutputs(def);
  if (wants.dweight || !wants.dbias) return {};
  return {static_cast<size_t>(NumElements(in[1].dims)) * ElementSize(in[1].dtype)};
}

std::vector<OperatorDef> FcGradient(const GradientContext& g) {
  return {MakeWeightGradientOp("FCGradient", g)};
}

}  // namespace

constexpr unsigned kFcGpuOptions = kTensorCore | kFloat16Compute;  // cuBLAS needs no workspace limit
LOCKSTEP_OPERATOR_SCHEMA(FC)
    .SetDoc("Y = X W^T + b, with X flattened to (N, K) at axis and W in Caffe2's (M, K) layout.")
    .Input(0, "X", "(d0, ..., dn): N is the product of the dims before axis, K of the others")
    .Input(1, "W", "(M, K)")
    .Input(2, "b", "(M)")
    .Output(0, "Y", "X's dims before axis, then M")
    .Arg("axis", ArgType::kInt, 1, "where X is flattened; negative counts from the last")
    .ShapeFunction(FcShape)
    .CostFunction(WeightedLayerCost)
    .TakesGpuOptions(kFcGpuOptions);
LOCKSTEP_OPERATOR_SCHEMA(FCGradient)
    .Include(DeclareWeightGradient("FC", "W", "b"))
    .ScratchFunction(FcGradientScratch)
    .TakesGpuOptions(kFcGpuOptions);
LOCKSTEP_REGISTER_CPU_OPERATOR(FC, FcOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(FCGradient, FcGradientOp);
LOCKSTEP_REGISTER_GRADIENT(FC, FcGradient);

}  // namespace lockstep
