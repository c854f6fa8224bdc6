// Cast: y = x converted to the dtype of arg `to` (a TensorProto.DataType value) or, with a second input, to
// that input's dtype. float32 <-> float16 / bfloat16 (rounding to nearest even; float32 <-> bfloat16 with
// oneDNN's reorder), same-type copies, and on CPUs the integers uint8, int32 and int64 to and from any of
// them (Caffe2's MNIST reads uint8 pixels and casts them): toward zero, a value the target cannot hold
// refused. Its gradient casts dy back to x's dtype, which is how float32
// master parameters receive float32 gradients from a network that computes in 16 bits. FloatToHalf and
// HalfToFloat are Caffe2's casts with fixed dtypes.
#include <cmath>
#include <limits>
#include <type_traits>

#include "lockstep/core/gradient.h"
#include "lockstep/core/half.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/dnnl_utils.h"
#include "lockstep/ops/op_defs.h"

namespace lockstep {
namespace {

bool IsFloating(DataType type) {
  return type == DataType::kFloat || type == DataType::kFloat16 || type == DataType::kBFloat16;
}

bool IsInteger(DataType type) {
  return type == DataType::kUInt8 || type == DataType::kInt32 || type == DataType::kInt64;
}

bool Castable(DataType type) { return IsFloating(type) || IsInteger(type); }

// The dtype y gets: input 1's when given, else arg `to`.
DataType TargetType(const OperatorDef& def, DataType like) {
  if (def.input_size() == 2) return like;
  if (!HasArgument(def, "to")) FailOperator(def, "needs the target dtype: arg to or input 1");
  const int64_t to = IntArg(def, "to");
  const auto type = static_cast<DataType>(to);
  if (!Castable(type))
    FailOperator(def,
                 fmt::format("arg to = {} is not a dtype Cast supports; use {} (float32), {} (float16), {} "
                             "(bfloat16), {} (int32), {} (uint8) or {} (int64)",
                             to, int(DataType::kFloat), int(DataType::kFloat16), int(DataType::kBFloat16),
                             int(DataType::kInt32), int(DataType::kUInt8), int(DataType::kInt64)));
  return type;
}

float Load(const Tensor& x, int64_t i) {
  switch (x.dtype()) {
    case DataType::kFloat16:
      return ToFloat(x.data<Float16>()[i]);
    case DataType::kBFloat16:
      return ToFloat(x.data<BFloat16>()[i]);
    default:
      return x.data<float>()[i];
  }
}

int64_t LoadInteger(const Tensor& x, int64_t i) {
  switch (x.dtype()) {
    case DataType::kUInt8:
      return x.data<uint8_t>()[i];
    case DataType::kInt32:
      return x.data<int32_t>()[i];
    default:
      return x.data<int64_t>()[i];
  }
}

void Store(Tensor* y, int64_t i, float value) {
  switch (y->dtype()) {
    case DataType::kFloat16:
      y->data<Float16>()[i] = ToFloat16(value);
      break;
    case DataType::kBFloat16:
      y->data<BFloat16>()[i] = ToBFloat16(value);
      break;
    default:
      y->data<float>()[i] = value;
  }
}

// Whether integer dtype `to` holds `value`, a whole number (int64_t or a truncated double).
template <typename V>
bool Holds(DataType to, V value) {
  auto in = [&](auto low, auto high) {
    if constexpr (std::is_integral_v<V>)
      return value >= low && value <= high;
    else  // a double: high + 1 is a power of two, exact where high itself may not be
      return value >= static_cast<double>(low) && value < static_cast<double>(high) + 1;
  };
  switch (to) {
    case DataType::kUInt8:
      return in(0, 255);
    case DataType::kInt32:
      return in(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
    default:
      return in(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  }
}

void StoreInteger(Tensor* y, int64_t i, int64_t value) {
  switch (y->dtype()) {
    case DataType::kUInt8:
      y->data<uint8_t>()[i] = static_cast<uint8_t>(value);
      break;
    case DataType::kInt32:
      y->data<int32_t>()[i] = static_cast<int32_t>(value);
      break;
    default:
      y->data<int64_t>()[i] = value;
  }
}

// y = x where one of them holds integers, element by element: floats toward zero; a value y's dtype cannot
// hold (NaN, infinities, out of range, a float16 above 65504) is refused, naming the element.
void CastIntegers(const OperatorDef& def, const Tensor& x, Tensor* y) {
  const DataType to = y->dtype();
  auto refuse = [&](int64_t i, const auto& value) {
    FailOperator(def, fmt::format("element {} is {}, which {} cannot hold", i, value, DataTypeName(to)));
  };
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (IsInteger(x.dtype())) {
      const int64_t value = LoadInteger(x, i);
      if (IsInteger(to)) {
        if (!Holds(to, value)) refuse(i, value);
        StoreInteger(y, i, value);
      } else {
        Store(y, i, static_cast<float>(value));
        if (std::isinf(Load(*y, i))) refuse(i, value);
      }
    } else {
      const float value = Load(x, i);
      const double whole = std::trunc(static_cast<double>(value));
      if (!Holds(to, whole)) refuse(i, static_cast<double>(value));  // NaN compares false
      StoreInteger(y, i, static_cast<int64_t>(whole));
    }
  }
}

// y = x converted to `to`; both are Castable.
void CastInto(const OperatorDef& def, const Tensor& x, DataType to, bool in_place, Tensor* y) {
  if (to == x.dtype()) return y->CopyFrom(x);
  LOCKSTEP_ENFORCE(!in_place, "{}: a cast between dtypes cannot run in place", DescribeOperator(def));
  y->Resize(x.shape(), to);
  if (x.numel() == 0) return;
  if (IsInteger(x.dtype()) || IsInteger(to)) return CastIntegers(def, x, y);
  // float32 <-> bfloat16 with oneDNN's threaded, vectorized reorder.
  if (x.dtype() != DataType::kFloat16 && to != DataType::kFloat16) {
    const Shape flat{x.numel()};
    ReorderInto(ToMemory(x, PlainDesc(flat, x.dtype())), ToMemory(*y, PlainDesc(flat, to)));
    return;
  }
  for (int64_t i = 0; i < x.numel(); ++i) Store(y, i, Load(x, i));
}

class CastOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& x = Input(0);  // x is any shape: float32, float16, bfloat16, uint8, int32 or int64
    const DataType to = TargetType(def_, InputSize() == 2 ? Input(1).dtype() : DataType::kUndefined);
    if (!Castable(x.dtype()) || !Castable(to))
      FailOperator(def_, fmt::format("cannot cast {} '{}' to {}; Cast converts float32, float16, bfloat16, "
                                     "uint8, int32 and int64",
                                     DataTypeName(x.dtype()), InputName(0), DataTypeName(to)));
    CastInto(def_, x, to, IsInplace(0, 0), Output(0));  // y has x's shape, dtype `to`
  }
};

// Caffe2's FloatToHalf and HalfToFloat: a Cast whose dtypes are fixed by the type, float32 -> float16 and
// back. Each one's gradient is the other.
template <DataType kFrom, DataType kTo>
class FixedCastOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& x = Input(0);  // x is any shape, dtype kFrom
    if (x.dtype() != kFrom)
      FailOperator(def_, fmt::format("'{}' is {}, but {} takes {}", InputName(0), DataTypeName(x.dtype()),
                                     def_.type(), DataTypeName(kFrom)));
    CastInto(def_, x, kTo, IsInplace(0, 0), Output(0));  // y has x's shape, dtype kTo
  }
};

std::vector<OperatorDef> CastGradient(const GradientContext& g) {
  return {MakeOperatorDef("Cast", {g.GO(0), g.I(0)}, {g.GI(0)})};
}

// dX of FloatToHalf is HalfToFloat(dY), and the other way round.
template <bool kToHalf>
std::vector<OperatorDef> FixedCastGradient(const GradientContext& g) {
  return {MakeOperatorDef(kToHalf ? "FloatToHalf" : "HalfToFloat", {g.GO(0)}, {g.GI(0)})};
}

template <DataType kFrom, DataType kTo>
void DeclareFixedCast(OpSchema& schema) {
  schema.Input(0, "X", fmt::format("any shape, {}", DataTypeName(kFrom)))
      .Output(0, "Y", fmt::format("X's shape, {}", DataTypeName(kTo)))
      .ShapeFunction([](const OperatorDef&, const std::vector<TensorShape>& in) {
        return std::vector<TensorShape>{{in[0].dims, kTo}};
      });
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(Cast)
    .SetDoc(
        "Y = X converted to another dtype: float32, float16 and bfloat16 (rounding to nearest even), and on "
        "CPUs uint8, int32 and int64 (toward zero; a value the dtype cannot hold is refused).")
    .Input(0, "X", "any shape")
    .OptionalInput(1, "like", "Y takes its dtype")
    .Output(0, "Y", "X's shape")
    .Arg("to", ArgType::kInt,
         "Y's dtype as a TensorProto.DataType (1 float32, 12 float16, 16 bfloat16, 2 int32, 6 uint8, 10 "
         "int64); required without input 1")
    .ShapeFunction([](const OperatorDef& def, const std::vector<TensorShape>& in) {
      return std::vector<TensorShape>{
          {in[0].dims, TargetType(def, in.size() == 2 ? in[1].dtype : DataType::kUndefined)}};
    });
LOCKSTEP_REGISTER_CPU_OPERATOR(Cast, CastOp);
LOCKSTEP_REGISTER_GRADIENT(Cast, CastGradient);

LOCKSTEP_OPERATOR_SCHEMA(FloatToHalf)
    .SetDoc("Y = X converted from float32 to float16, rounding to nearest even (Caffe2's FloatToHalf).")
    .Include(DeclareFixedCast<DataType::kFloat, DataType::kFloat16>);
LOCKSTEP_OPERATOR_SCHEMA(HalfToFloat)
    .SetDoc("Y = X converted from float16 to float32, exactly (Caffe2's HalfToFloat).")
    .Include(DeclareFixedCast<DataType::kFloat16, DataType::kFloat>);
LOCKSTEP_REGISTER_CPU_OPERATOR(FloatToHalf, FixedCastOp<DataType::kFloat, DataType::kFloat16>);
LOCKSTEP_REGISTER_CPU_OPERATOR(HalfToFloat, FixedCastOp<DataType::kFloat16, DataType::kFloat>);
LOCKSTEP_REGISTER_GRADIENT(FloatToHalf, FixedCastGradient<false>);
LOCKSTEP_REGISTER_GRADIENT(HalfToFloat, FixedCastGradient<true>);

OperatorDef CastDef(const std::string& input, const std::string& output, DataType to) {
  return MakeOperatorDef("Cast", {input}, {output}, {Arg("to", static_cast<int>(to))});
}

}  // namespace lockstep
