// Concat joins tensors along an axis and records each one's extent there (split_info); Split cuts a tensor
// along an axis by such extents and is Concat's gradient. Both are strided memcpy: viewed as
// (outer, extent * inner), every piece is one contiguous run per outer index.
#include <cstring>

#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/op_defs.h"

namespace lockstep {
namespace {

int CheckedAxis(const OperatorDef& def, const Shape& shape) {
  int rank = static_cast<int>(shape.size());
  int axis = static_cast<int>(IntArg(def, "axis"));
  if (axis < -rank || axis >= rank)
    FailOperator(def, fmt::format("axis {} is out of range for shape {}", axis, ShapeToString(shape)));
  return axis < 0 ? axis + rank : axis;
}

int64_t Product(const Shape& shape, int begin, int end) {
  int64_t n = 1;
  for (int i = begin; i < end; ++i) n *= shape[i];
  return n;
}

// Output shapes of Concat: Y (the inputs joined along axis) and split_info (one int32 per input).
std::vector<TensorShape> ConcatShapes(const OperatorDef& def, const std::vector<TensorShape>& in) {
  const Shape& first = in[0].dims;
  int axis = CheckedAxis(def, first);
  Shape joined = first;
  for (size_t i = 1; i < in.size(); ++i) {
    const Shape& shape = in[i].dims;
    bool compatible = shape.size() == first.size();
    for (size_t d = 0; compatible && d < shape.size(); ++d)
      compatible = static_cast<int>(d) == axis || shape[d] == first[d];
    if (!compatible)
      FailOperator(
          def, fmt::format("input '{}' is {} but '{}' is {}; they may differ only in axis {}", def.input(i),
                           ShapeToString(shape), def.input(0), ShapeToString(first), axis));
    if (in[i].dtype != in[0].dtype)
      FailOperator(def, fmt::format("input '{}' is {} but '{}' is {}", def.input(i),
                                    DataTypeName(in[i].dtype), def.input(0), DataTypeName(in[0].dtype)));
    joined[axis] += shape[axis];
  }
  return {{joined, in[0].dtype}, {{static_cast<int64_t>(in.size())}, DataType::kInt32}};
}

class ConcatOp : public Operator {
 public:
  ConcatOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws), input_shapes_(def.input_size()) {}

  void Run() override {
    for (int i = 0; i < InputSize(); ++i) input_shapes_[i] = {Input(i).shape(), Input(i).dtype()};
    auto shapes = ConcatShapes(def_, input_shapes_);
    int axis = CheckedAxis(def_, shapes[0].dims);
    Tensor* y = Output(0);           // y is the inputs joined along axis
    Tensor* split_info = Output(1);  // split_info is (number of inputs): each input's extent along axis
    y->Resize(shapes[0].dims, shapes[0].dtype);
    split_info->Resize(shapes[1].dims, DataType::kInt32);
    const Shape& shape = y->shape();
    int64_t outer = Product(shape, 0, axis);
    size_t element = ElementSize(y->dtype());
    size_t row_bytes = Product(shape, axis, y->ndim()) * element;
    size_t offset = 0;  // bytes into each row of y
    for (int i = 0; i < InputSize(); ++i) {
      const Tensor& x = Input(i);  // x has y's shape except along axis
      split_info->data<int32_t>()[i] = static_cast<int32_t>(x.dim(axis));
      size_t piece_bytes = Product(x.shape(), axis, x.ndim()) * element;
      const auto* from = static_cast<const uint8_t*>(x.raw_data());
      auto* to = static_cast<uint8_t*>(y->raw_data()) + offset;
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(to + o * row_bytes, from + o * piece_bytes, piece_bytes);
      offset += piece_bytes;
    }
  }

 private:
  std::vector<TensorShape> input_shapes_;
};

// The extents of Split's pieces along an axis of length `total`: `extents` as given (input 1 or arg split)
// or, when empty, equal pieces, one per output. Arg `parts` lists which pieces are outputs, in order
// (default: all), so that Concat's gradient can skip inputs that need none.
void ResolveExtents(const OperatorDef& def, int64_t total, const std::vector<int64_t>& parts,
                    std::vector<int64_t>* extents) {
  int outputs = def.output_size();
  if (extents->empty()) {
    if (!parts.empty()) FailOperator(def, "arg parts needs explicit extents (input 1 or arg split)");
    if (total % outputs != 0)
      FailOperator(
          def, fmt::format("extent {} does not divide into {} equal pieces; pass arg split", total, outputs));
    extents->assign(outputs, total / outputs);
  }
  int64_t sum = 0;
  for (int64_t extent : *extents) {
    if (extent < 0) FailOperator(def, fmt::format("negative extent {}", extent));
    sum += extent;
  }
  if (sum != total) FailOperator(def, fmt::format("extents sum to {} but the axis has {}", sum, total));
  if (parts.empty() && extents->size() != static_cast<size_t>(outputs))
    FailOperator(def, fmt::format("{} pieces for {} outputs", extents->size(), outputs));
  if (parts.size() != (parts.empty() ? 0 : static_cast<size_t>(outputs)))
    FailOperator(def, fmt::format("arg parts lists {} pieces for {} outputs", parts.size(), outputs));
  for (size_t k = 0; k < parts.size(); ++k)
    if (parts[k] < 0 || parts[k] >= static_cast<int64_t>(extents->size()) ||
        (k > 0 && parts[k] <= parts[k - 1]))
      FailOperator(def, fmt::format("arg parts must be increasing piece indices below {}", extents->size()));
}

class SplitOp : public Operator {
 public:
  SplitOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), split_arg_(IntsArg("split")), parts_(IntsArg("parts")) {
    if (InputSize() == 2 && !split_arg_.empty())
      FailOperator(def, "give the extents as input 1 or as arg split, not both");
  }

  void Run() override {
    const Tensor& x = Input(0);  // x is any shape
    int axis = CheckedAxis(def_, x.shape());
    if (InputSize() == 2) {
      const Tensor& split_info = Input(1);  // split_info is (pieces), int32
      if (split_info.dtype() != DataType::kInt32 || split_info.ndim() != 1)
        FailOperator(def_, fmt::format("split_info must be a 1-D int32 tensor, got {} {}",
                                       DataTypeName(split_info.dtype()), ShapeToString(split_info.shape())));
      extents_.assign(split_info.data<int32_t>(), split_info.data<int32_t>() + split_info.numel());
    } else {
      extents_ = split_arg_;
    }
    ResolveExtents(def_, x.dim(axis), parts_, &extents_);
    int64_t outer = Product(x.shape(), 0, axis);
    size_t inner_bytes = Product(x.shape(), axis + 1, x.ndim()) * ElementSize(x.dtype());
    size_t row_bytes = x.dim(axis) * inner_bytes;
    int64_t start = 0;  // where the current piece begins along axis
    int next_output = 0;
    for (size_t piece = 0; piece < extents_.size() && next_output < OutputSize(); ++piece) {
      int64_t extent = extents_[piece];
      bool wanted = parts_.empty() || parts_[next_output] == static_cast<int64_t>(piece);
      if (wanted) {
        Tensor* y = Output(next_output++);  // y is x with `extent` along axis
        Shape shape = x.shape();
        shape[axis] = extent;
        y->Resize(shape, x.dtype());
        size_t piece_bytes = extent * inner_bytes;
        const auto* from = static_cast<const uint8_t*>(x.raw_data()) + start * inner_bytes;
        auto* to = static_cast<uint8_t*>(y->raw_data());
        for (int64_t o = 0; o < outer; ++o)
          std::memcpy(to + o * piece_bytes, from + o * row_bytes, piece_bytes);
      }
      start += extent;
    }
  }

 private:
  std::vector<int64_t> split_arg_;
  std::vector<int64_t> parts_;
  std::vector<int64_t> extents_;
};

// Only extents given as args are known before running; split_info is data.
std::vector<TensorShape> SplitShapes(const OperatorDef& def, const std::vector<TensorShape>& in) {
  if (in.size() == 2)
    FailOperator(
        def, fmt::format("output shapes depend on the values of '{}'; pass arg split instead", def.input(1)));
  int axis = CheckedAxis(def, in[0].dims);
  auto extents = IntsArg(def, "split");
  auto parts = IntsArg(def, "parts");
  ResolveExtents(def, in[0].dims[axis], parts, &extents);
  std::vector<TensorShape> out(def.output_size(), in[0]);
  for (int k = 0; k < def.output_size(); ++k) out[k].dims[axis] = extents[parts.empty() ? k : parts[k]];
  return out;
}

std::vector<OperatorDef> ConcatGradient(const GradientContext& g) {
  std::vector<std::string> outputs;
  std::vector<int64_t> parts;
  for (int i = 0; i < g.def.input_size(); ++i) {
    if (!g.NeedsGI(i)) continue;
    outputs.push_back(g.GI(i));
    parts.push_back(i);
  }
  auto args = g.Args();
  if (parts.size() < static_cast<size_t>(g.def.input_size())) args.emplace_back("parts", parts);
  return {MakeOperatorDef("Split", {g.GO(0), g.O(1)}, outputs, args)};
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(Concat)
    .SetDoc("Joins the inputs along an axis, and records each one's extent there.")
    .Input(0, "X...", "the same shape except along axis")
    .Output(0, "Y", "the inputs joined along axis")
    .Output(1, "split_info", "(number of inputs) int32: each input's extent along axis")
    .Arg("axis", ArgType::kInt, 1, "the axis to join along; negative counts from the last")
    .Include(DeclareNchwOrder)
    .NumInputs(1, INT_MAX)
    .ShapeFunction(ConcatShapes);
LOCKSTEP_OPERATOR_SCHEMA(Split)
    .SetDoc("Cuts X along an axis into pieces of the given extents (or equal ones); Concat's gradient.")
    .Input(0, "X", "any shape")
    .OptionalInput(1, "split_info", "(pieces) int32 extents, as Concat writes them")
    .Output(0, "Y...", "the pieces that parts lists, in order")
    .Arg("axis", ArgType::kInt, 1, "the axis to cut along; negative counts from the last")
    .Include(DeclareNchwOrder)
    .Arg("split", ArgType::kInts, std::vector<int64_t>{},
         "the pieces' extents along axis, instead of input 1; none and no input 1: equal pieces, one per "
         "output")
    .Min(0)
    .Arg("parts", ArgType::kInts, std::vector<int64_t>{},
         "which pieces are outputs, increasing indices; none: all")
    .Min(0)
    .NumOutputs(1, INT_MAX)
    .ShapeFunction(SplitShapes);
LOCKSTEP_REGISTER_CPU_OPERATOR(Concat, ConcatOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(Split, SplitOp);
LOCKSTEP_REGISTER_GRADIENT(Concat, ConcatGradient);

OperatorDef SplitDef(const std::string& input, const std::vector<std::string>& pieces) {
  return MakeOperatorDef("Split", {input}, pieces, {Arg("axis", 0)});
}

OperatorDef ConcatDef(const std::vector<std::string>& inputs, const std::string& output,
                      const std::string& split_info) {
  return MakeOperatorDef("Concat", inputs, {output, split_info}, {Arg("axis", 0)});
}

}  // namespace lockstep
