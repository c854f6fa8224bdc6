// Element-wise arithmetic on oneDNN primitives: Add (with suffix broadcasting), Sum of many tensors (the
// autodiff's way of adding partial gradients), Scale, and SumReduceLike, which undoes Add's broadcast. Add
// without broadcast and Scale compute in the layout of their first input and leave it on the output; Sum
// prefers a channel-blocked one when an input has it.
#include "lockstep/ops/elementwise_ops.h"

#include <algorithm>

#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/dnnl_utils.h"
#include "lockstep/ops/eltwise_op.h"
#include "lockstep/ops/op_defs.h"

namespace lockstep {

Shape AddShape(const OperatorDef& def, const Shape& a, const Shape& b) {
  bool broadcast = IntArg(def, "broadcast") != 0;
  if (!broadcast && a != b)
    FailOperator(def, fmt::format("A {} and B {} differ; pass broadcast=1 when B's shape is a suffix of A's",
                                  ShapeToString(a), ShapeToString(b)));
  if (b.size() > a.size() || !std::equal(b.begin(), b.end(), a.end() - b.size()))
    FailOperator(def, fmt::format("B {} must match the last dims of A {} to broadcast", ShapeToString(b),
                                  ShapeToString(a)));
  return a;
}

void CheckAddInPlace(const OperatorDef& def, bool c_is_b, const Shape& a, const Shape& b) {
  if (c_is_b && a != b) FailOperator(def, "C may overwrite B only when A and B have the same shape");
}

void CheckSumInput(const OperatorDef& def, int i, const Shape& shape, const Shape& first) {
  if (shape != first)
    FailOperator(def, fmt::format("input '{}' is {} but '{}' is {}; Sum needs equal shapes", def.input(i),
                                  ShapeToString(shape), def.input(0), ShapeToString(first)));
}

void CheckSumReduceLikeShapes(const OperatorDef& def, const Shape& dy, const Shape& b) {
  if (b.size() > dy.size() || !std::equal(b.begin(), b.end(), dy.end() - b.size()))
    FailOperator(def,
                 fmt::format("B {} must match the last dims of dY {}", ShapeToString(b), ShapeToString(dy)));
}

namespace {

// The descriptor an element-wise op sees `tensor` through: its backend layout, or plain. oneDNN takes ranks 1
// to 5 only, so plain tensors of other ranks (scalars included) are seen as flat vectors.
dnnl::memory::desc ElementwiseDesc(const Tensor& tensor) {
  if (!tensor.is_plain()) return tensor.layout()->desc;
  return PlainDesc(tensor.ndim() >= 1 && tensor.ndim() <= 5 ? tensor.shape() : Shape{tensor.numel()},
                   tensor.dtype());
}

// `tensor` in `desc` (the ElementwiseDesc of a tensor of the same shape), reordered into `scratch` when its
// layout differs.
dnnl::memory InLayout(const Tensor& tensor, const dnnl::memory::desc& desc, int slot) {
  return ReorderIfNeeded(ToMemory(tensor, ElementwiseDesc(tensor)), desc, slot);
}

// Sizes `out` to `shape` in `desc` (the ElementwiseDesc of a tensor of that shape). The buffer stays when
// `out` already has that shape and layout, so an output that is also an input is not lost.
dnnl::memory ResizeElementwise(Tensor* out, const Shape& shape, const dnnl::memory::desc& desc) {
  if (shape.empty() || shape.size() > 5) {  // plain, seen as a flat vector
    out->Resize(shape, DataTypeOf(desc.get_data_type()));
    return ToMemory(*out, desc);
  }
  return ResizeForDesc(out, shape, desc);
}

// Without broadcast, C = A + B in A's layout, with B reordered when its layout differs. With broadcast=1 the
// op sees plain copies. With relu=1, C = max(A + B, 0) in the same pass (oneDNN's post-op).
class AddOp : public Operator {
 public:
  AddOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), broadcast_(IntArg("broadcast") != 0), relu_(IntArg("relu") != 0) {
    if (!broadcast_) AcceptLayouts();
  }

  void Run() override {
    const Tensor& a = Input(0);  // a is any shape (any layout without broadcast)
    const Tensor& b = Input(1);  // b is a's shape, or a suffix of it with broadcast=1
    Shape shape = AddShape(def_, a.shape(), b.shape());
    CheckAddInPlace(def_, IsInplace(1, 0), a.shape(), b.shape());
    Tensor* c = Output(0);  // c has a's shape (and layout, without broadcast)
    if (broadcast_) {
      c->Resize(shape, a.dtype());
      if (c->numel() == 0) return;
      // a is (outer, inner) and b is (1, inner) once flattened.
      int64_t inner = b.numel();
      auto full = PlainDesc({a.numel() / inner, inner}, a.dtype());
      Compute(ToMemory(a, full), ToMemory(b, PlainDesc({1, inner}, b.dtype())), ToMemory(*c, full));
      return;
    }
    auto desc = ElementwiseDesc(a);
    dnnl::memory second = InLayout(b, desc, 0);  // before sizing C, which may be B
    dnnl::memory first = ToMemory(a, desc);
    dnnl::memory dst = ResizeElementwise(c, shape, desc);
    if (c->numel() == 0) return;
    Compute(first, second, dst);
  }

 private:
  // dst = first + second, where second may broadcast over first's leading dim (1 there).
  void Compute(dnnl::memory first, dnnl::memory second, const dnnl::memory& dst) {
    // oneDNN computes in place only over its first source; addition commutes, so when dst is the second
    // (the shapes are then equal) they trade places.
    if (second.get_data_handle() == dst.get_data_handle()) std::swap(first, second);
    if (first.get_desc() != first_desc_ || second.get_desc() != second_desc_) {
      first_desc_ = first.get_desc();
      second_desc_ = second.get_desc();
      primitive_ =
          dnnl::binary(dnnl::binary::primitive_desc(CpuEngine(), dnnl::algorithm::binary_add, first_desc_,
                                                    second_desc_, dst.get_desc(), ReluPostOp(relu_)));
    }
    Execute(primitive_, {{DNNL_ARG_SRC_0, first}, {DNNL_ARG_SRC_1, second}, {DNNL_ARG_DST, dst}});
  }

  bool broadcast_;
  bool relu_;
  dnnl::memory::desc first_desc_, second_desc_;
  dnnl::binary primitive_;
};

// Y = X0 + X1 + ... in X0's layout; the others are reordered where their layouts differ.
class SumOp : public Operator {
 public:
  SumOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws) { AcceptLayouts(); }

  void Run() override {
    const Tensor& x0 = Input(0);  // every input is x0's shape, any layout
    for (int i = 1; i < InputSize(); ++i) CheckSumInput(def_, i, Input(i).shape(), x0.shape());
    Tensor* y = Output(0);  // y has x0's shape and the layout below; it may be x0 itself
    auto desc = SumLayout();
    std::unordered_map<int, dnnl::memory> args;
    for (int i = 0; i < InputSize(); ++i) args[DNNL_ARG_MULTIPLE_SRC + i] = InLayout(Input(i), desc, i);
    args[DNNL_ARG_DST] = ResizeElementwise(y, x0.shape(), desc);
    if (y->numel() == 0) return;
    if (desc != desc_) {
      desc_ = desc;
      primitive_ =
          dnnl::sum(dnnl::sum::primitive_desc(CpuEngine(), desc, std::vector<float>(InputSize(), 1.f),
                                              std::vector<dnnl::memory::desc>(InputSize(), desc)));
    }
    Execute(primitive_, args);
  }

 private:
  // x0's layout, unless the inputs disagree and another one has channel blocks (nChw16c): oneDNN's direct
  // convolutions and eltwise passes produce and take those, so the sum's reader then needs no reorder (in a
  // ResNet's backward pass the strided shortcut's gradient arrives in NHWC, the main branch's blocked).
  dnnl::memory::desc SumLayout() {
    dnnl::memory::desc first = ElementwiseDesc(Input(0));
    if (first.get_inner_nblks() > 0) return first;
    for (int i = 1; i < InputSize(); ++i) {
      dnnl::memory::desc desc = ElementwiseDesc(Input(i));
      if (desc.get_inner_nblks() > 0) return desc;
    }
    return first;
  }

  dnnl::memory::desc desc_;
  dnnl::sum primitive_;
};

std::vector<TensorShape> SumShapes(const OperatorDef& def, const std::vector<TensorShape>& in) {
  for (size_t i = 1; i < in.size(); ++i) CheckSumInput(def, static_cast<int>(i), in[i].dims, in[0].dims);
  return {in[0]};
}

// y = scale * x with oneDNN's linear eltwise, in x's layout; with scale 1 it is the copy that gradients of
// Add and Sum use.
class ScaleOp : public Operator {
 public:
  ScaleOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws), scale_(FloatArg("scale")) {
    AcceptLayouts();
  }

  void Run() override {
    const Tensor& x = Input(0);  // x is any shape, any layout
    Tensor* y = Output(0);       // y has x's shape and layout
    auto desc = ElementwiseDesc(x);
    dnnl::memory src = ToMemory(x, desc);
    dnnl::memory dst = ResizeElementwise(y, x.shape(), desc);
    if (x.numel() == 0) return;
    if (desc != desc_) {
      desc_ = desc;
      primitive_ = dnnl::eltwise_forward(
          dnnl::eltwise_forward::primitive_desc(CpuEngine(), dnnl::prop_kind::forward_inference,
                                                dnnl::algorithm::eltwise_linear, desc, desc, scale_, 0.f));
    }
    Execute(primitive_, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  }

 private:
  float scale_;
  dnnl::memory::desc desc_;
  dnnl::eltwise_forward primitive_;
};

// dB of a broadcast Add: sums dY over the leading dims that B lacks.
class SumReduceLikeOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& dy = Input(0);  // dy is (outer, inner) once flattened
    const Tensor& b = Input(1);   // b's shape is a suffix of dy's: (inner)
    Tensor* db = Output(0);       // db has b's shape and dy's dtype
    CheckSumReduceLikeShapes(def_, dy.shape(), b.shape());
    db->Resize(b.shape(), dy.dtype());
    if (db->numel() == 0) return;
    int64_t inner = b.numel();
    int64_t outer = dy.numel() / inner;
    if (outer == 1) {  // nothing to reduce; oneDNN's reduction wants at least one reduced dim
      db->CopyFrom(dy);
      db->Resize(b.shape(), dy.dtype());
      return;
    }
    const auto src = PlainDesc({outer, inner}, dy.dtype()), dst = PlainDesc({1, inner}, dy.dtype());
    if (src != src_) {
      src_ = src;
      primitive_ = dnnl::reduction(
          dnnl::reduction::primitive_desc(CpuEngine(), dnnl::algorithm::reduction_sum, src, dst, 0.f, 0.f));
    }
    Execute(primitive_, {{DNNL_ARG_SRC, ToMemory(dy, src)}, {DNNL_ARG_DST, ToMemory(*db, dst)}});
  }

 private:
  dnnl::memory::desc src_;
  dnnl::reduction primitive_;
};

// dY flows through Add and Sum unchanged: the inputs' gradients are dY itself, with no op and no copy. With
// relu=1 the sum's gradient comes first, from C as ReLU's does.
std::vector<OperatorDef> AddGradient(GradientContext& g) {
  std::vector<OperatorDef> ops;
  const std::string dsum = IntArg(g.def, "relu") != 0 ? GradientBeforeFusedRelu(g, &ops) : g.GO(0);
  g.PassThrough(0, dsum);
  if (!g.NeedsGI(1)) return ops;
  if (IntArg(g.def, "broadcast") != 0)
    ops.push_back(MakeOperatorDef("SumReduceLike", {dsum, g.I(1)}, {g.GI(1)}));
  else
    g.PassThrough(1, dsum);
  return ops;
}

std::vector<OperatorDef> SumGradient(GradientContext& g) {
  for (int i = 0; i < g.def.input_size(); ++i) g.PassThrough(i, g.GO(0));
  return {};
}

std::vector<OperatorDef> ScaleGradient(const GradientContext& g) {
  return {MakeOperatorDef("Scale", {g.GO(0)}, {g.GI(0)}, g.Args())};
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(Add)
    .SetDoc(
        "C = A + B, element-wise; with broadcast=1, B's shape may be a suffix of A's; with relu=1, "
        "max(A + B, 0).")
    .Input(0, "A", "any shape")
    .Input(1, "B", "A's shape, or a suffix of it with broadcast=1")
    .Output(0, "C", "A's shape; may be A, or B when they have the same shape")
    .Arg("broadcast", ArgType::kInt, 0, "1: B is repeated over A's leading dims")
    .Range(0, 1)
    .Arg("relu", ArgType::kInt, 0, "1: C = max(A + B, 0) in the same pass (a residual block's end)")
    .Range(0, 1)
    .AllowInplace({{0, 0}, {1, 0}})
    .ShapeFunction([](const OperatorDef& def, const std::vector<TensorShape>& in) {
      return std::vector<TensorShape>{{AddShape(def, in[0].dims, in[1].dims), in[0].dtype}};
    });
LOCKSTEP_OPERATOR_SCHEMA(Sum)
    .SetDoc("Y = the element-wise sum of the inputs (how the backward pass adds partial gradients).")
    .Input(0, "X...", "one shape")
    .Output(0, "Y", "the inputs' shape; may be the first input")
    .NumInputs(1, INT_MAX)
    .AllowInplace({{0, 0}})
    .ShapeFunction(SumShapes)
    .Role(OpRole::kGradientSum);
LOCKSTEP_OPERATOR_SCHEMA(Scale)
    .SetDoc("Y = scale * X, element-wise, in X's layout.")
    .Input(0, "X", "any shape")
    .Output(0, "Y", "X's shape; may be X")
    .Arg("scale", ArgType::kFloat, 1.0f, "the factor")
    .AllowInplace({{0, 0}})
    .IdentityShape();
LOCKSTEP_OPERATOR_SCHEMA(SumReduceLike)
    .SetDoc("dB of a broadcast Add: dY summed over the leading dims that B lacks.")
    .Input(0, "dY", "A's shape")
    .Input(1, "B", "a suffix of dY's shape")
    .Output(0, "dB", "B's shape")
    .DimsOfInput(1);
LOCKSTEP_REGISTER_CPU_OPERATOR(Add, AddOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(Sum, SumOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(Scale, ScaleOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(SumReduceLike, SumReduceLikeOp);
LOCKSTEP_REGISTER_GRADIENT(Add, AddGradient);
LOCKSTEP_REGISTER_GRADIENT(Sum, SumGradient);
LOCKSTEP_REGISTER_GRADIENT(Scale, ScaleGradient);

OperatorDef ScaleDef(const std::string& input, const std::string& output, float scale) {
  return MakeOperatorDef("Scale", {input}, {output}, {Arg("scale", scale)});
}

}  // namespace lockstep
