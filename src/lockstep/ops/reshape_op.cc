// Flatten, FlattenToVec, Reshape and ResizeLike: the same bytes under another shape. Tensors have no views,
// so the data is copied unless the op runs in place; gradients reshape dY back to X's shape. They only copy
// through Tensor, which crosses memories, so each class serves CPU and CUDA devices.
#include <algorithm>

#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"

namespace lockstep {
namespace {

// Copies x into y under `shape` (same element count); in place only the shape changes.
void CopyWithShape(const Tensor& x, const Shape& shape, Tensor* y) {
  y->CopyFrom(x);
  y->Resize(shape, x.dtype());
}

// Flatten keeps the dims before axis as one and those from axis on as the other: (N, C, H, W), axis 1 ->
// (N, C*H*W).
Shape FlattenShape(const OperatorDef& def, const Shape& x) {
  int64_t axis = IntArg(def, "axis");
  if (axis < 0 || axis > static_cast<int64_t>(x.size()))
    FailOperator(def, fmt::format("axis {} is out of range for shape {}", axis, ShapeToString(x)));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) (i < axis ? outer : inner) *= x[i];
  return {outer, inner};
}

// Caffe2's rules: 0 copies the input's dim at that index, one -1 takes what is left.
Shape ReshapedShape(const OperatorDef& def, const Shape& x, const std::vector<int64_t>& requested) {
  Shape shape(requested.begin(), requested.end());
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) {
      if (i >= x.size())
        FailOperator(def, fmt::format("dim {} of the new shape is 0 (copy) but X {} has no dim {}", i,
                                      ShapeToString(x), i));
      shape[i] = x[i];
    }
    if (shape[i] == -1) {
      if (infer >= 0) FailOperator(def, "the new shape may have only one -1");
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      FailOperator(def, fmt::format("invalid dim {} in the new shape", shape[i]));
    } else {
      known *= shape[i];
    }
  }
  int64_t total = NumElements(x);
  if (infer >= 0 && known > 0 && total % known == 0) shape[infer] = total / known;
  if (infer >= 0 ? (known == 0 || total % known != 0) : known != total)
    FailOperator(def, fmt::format("cannot reshape X {} ({} elements) to ({})", ShapeToString(x), total,
                                  fmt::join(requested, ", ")));
  return shape;
}

class FlattenOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& x = Input(0);                                  // x is (d0, ..., dk)
    CopyWithShape(x, FlattenShape(def_, x.shape()), Output(0));  // y is (d0*...*d(axis-1), d(axis)*...*dk)
  }
};

// Caffe2's FlattenToVec: X as one vector.
class FlattenToVecOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& x = Input(0);                // x is any shape
    CopyWithShape(x, {x.numel()}, Output(0));  // y is (d0*...*dk)
  }
};

// Reshape(X[, new_shape]) -> Y[, old_shape]: the new shape comes from arg `shape` or from input 1 (int64 or
// int32); old_shape records X's dims (int64) so that the gradient can reshape back without keeping X alive.
// Both pass through host memory: the host needs the new shape to size Y.
class ReshapeOp : public Operator {
 public:
  ReshapeOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws), requested_(IntsArg("shape")) {
    bool from_arg = HasArgument(def, "shape");
    if (from_arg == (InputSize() == 2))
      FailOperator(def, "give the new shape either as arg shape or as input 1, exactly once");
  }

  void Run() override {
    const Tensor& x = Input(0);  // x is any shape
    if (InputSize() == 2) ReadRequestedShape(Input(1));
    Shape shape = ReshapedShape(def_, x.shape(), requested_);
    if (OutputSize() == 2) {  // before Y, which may be X itself
      old_shape_.Resize({x.ndim()}, DataType::kInt64);
      std::copy(x.shape().begin(), x.shape().end(), old_shape_.data<int64_t>());
      Output(1)->CopyFrom(old_shape_);  // old_shape is (x's rank), int64
    }
    CopyWithShape(x, shape, Output(0));  // y is `shape`
  }

 private:
  void ReadRequestedShape(const Tensor& new_shape) {  // new_shape is (rank), int64 or int32
    if (new_shape.ndim() != 1 ||
        (new_shape.dtype() != DataType::kInt64 && new_shape.dtype() != DataType::kInt32))
      FailOperator(
          def_, fmt::format("the new shape '{}' must be a 1-D int64 or int32 tensor, got {} {}", InputName(1),
                            DataTypeName(new_shape.dtype()), ShapeToString(new_shape.shape())));
    new_shape_.CopyFrom(new_shape);  // from a device, this waits for it
    if (new_shape_.dtype() == DataType::kInt64)
      requested_.assign(new_shape_.data<int64_t>(), new_shape_.data<int64_t>() + new_shape_.numel());
    else
      requested_.assign(new_shape_.data<int32_t>(), new_shape_.data<int32_t>() + new_shape_.numel());
  }

  std::vector<int64_t> requested_;
  Tensor new_shape_;  // input 1, in host memory
  Tensor old_shape_;  // output 1's values, in host memory
};

// ResizeLike(A, B) -> C: A's data with B's shape (the gradient of Flatten).
class ResizeLikeOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& a = Input(0);  // a has as many elements as b
    const Tensor& b = Input(1);  // b is any shape
    if (a.numel() != b.numel())
      FailOperator(def_, fmt::format("'{}' {} and '{}' {} differ in element count", InputName(0),
                                     ShapeToString(a.shape()), InputName(1), ShapeToString(b.shape())));
    CopyWithShape(a, b.shape(), Output(0));
  }
};

std::vector<OperatorDef> FlattenGradient(const GradientContext& g) {
  return {MakeOperatorDef("ResizeLike", {g.GO(0), g.I(0)}, {g.GI(0)})};
}

std::vector<OperatorDef> ReshapeGradient(const GradientContext& g) {
  if (g.def.output_size() == 1) return {MakeOperatorDef("ResizeLike", {g.GO(0), g.I(0)}, {g.GI(0)})};
  // Reshape insists on writing an old shape; this one is never read.
  return {MakeOperatorDef("Reshape", {g.GO(0), g.O(1)}, {g.GI(0), "_" + g.GI(0) + "_dims"})};
}

std::vector<TensorShape> ReshapeShapes(const OperatorDef& def, const std::vector<TensorShape>& in) {
  if (in.size() == 2)
    FailOperator(def, fmt::format("the output shape depends on the values of '{}'; pass arg shape instead",
                                  def.input(1)));
  std::vector<TensorShape> out{{ReshapedShape(def, in[0].dims, IntsArg(def, "shape")), in[0].dtype}};
  if (def.output_size() == 2) out.push_back({{static_cast<int64_t>(in[0].dims.size())}, DataType::kInt64});
  return out;
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(Flatten)
    .SetDoc("X as a matrix: the dims before axis become one, those from axis on the other.")
    .Input(0, "X", "any shape")
    .Output(0, "Y", "(product of X's dims before axis, product of the rest); may be X")
    .Arg("axis", ArgType::kInt, 1, "where the dims are split, 0 to X's rank")
    .AllowInplace({{0, 0}})
    .ShapeFunction([](const OperatorDef& def, const std::vector<TensorShape>& in) {
      return std::vector<TensorShape>{{FlattenShape(def, in[0].dims), in[0].dtype}};
    });
LOCKSTEP_OPERATOR_SCHEMA(FlattenToVec)
    .SetDoc("X as a vector of all its elements (Caffe2's FlattenToVec).")
    .Input(0, "X", "any shape")
    .Output(0, "Y", "(X's size); may be X")
    .AllowInplace({{0, 0}})
    .ShapeFunction([](const OperatorDef&, const std::vector<TensorShape>& in) {
      return std::vector<TensorShape>{{{NumElements(in[0].dims)}, in[0].dtype}};
    });
LOCKSTEP_OPERATOR_SCHEMA(Reshape)
    .SetDoc("X's data under a new shape (Caffe2's rules: 0 keeps X's dim there, one -1 takes what is left).")
    .Input(0, "X", "any shape")
    .OptionalInput(1, "new_shape", "instead of arg shape: (rank) int64 or int32, in host memory")
    .Output(0, "Y", "the new shape; may be X")
    .OptionalOutput(1, "old_shape", "X's dims, int64 (what the gradient reshapes back to)")
    .Arg("shape", ArgType::kInts, std::vector<int64_t>{}, "the new shape, unless input 1 gives it")
    .AllowInplace({{0, 0}})
    .ShapeFunction(ReshapeShapes);
LOCKSTEP_OPERATOR_SCHEMA(ResizeLike)
    .SetDoc("A's data under B's shape (Flatten's and FlattenToVec's gradient).")
    .Input(0, "A", "as many elements as B")
    .Input(1, "B", "any shape")
    .Output(0, "C", "B's shape; may be A")
    .AllowInplace({{0, 0}})
    .DimsOfInput(1);
LOCKSTEP_REGISTER_CPU_OPERATOR(Flatten, FlattenOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(Flatten, FlattenOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(FlattenToVec, FlattenToVecOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(FlattenToVec, FlattenToVecOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(Reshape, ReshapeOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(Reshape, ReshapeOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(ResizeLike, ResizeLikeOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(ResizeLike, ResizeLikeOp);
LOCKSTEP_REGISTER_GRADIENT(Flatten, FlattenGradient);
LOCKSTEP_REGISTER_GRADIENT(FlattenToVec, FlattenGradient);
LOCKSTEP_REGISTER_GRADIENT(Reshape, ReshapeGradient);

}  // namespace lockstep
