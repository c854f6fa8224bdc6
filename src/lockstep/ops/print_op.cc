// Print (Caffe2's): writes a blob to stderr as one line, "name (dtype shape): values", every every_n-th run,
// at most `limit` values. Caffe2's to_file (a file per blob in the workspace's folder) is refused: a lockstep
// workspace has no folder; redirect stderr instead.
#include "lockstep/core/gradient.h"
#include "lockstep/core/half.h"
#include "lockstep/core/operator.h"

namespace lockstep {
namespace {

// Caffe2 prints the first 1000 values when limit is 0.
constexpr int64_t kDefaultLimit = 1000;

double ValueAt(const Tensor& x, int64_t i) {
  switch (x.dtype()) {
    case DataType::kFloat:
      return x.data<float>()[i];
    case DataType::kFloat16:
      return ToFloat(x.data<Float16>()[i]);
    case DataType::kBFloat16:
      return ToFloat(x.data<BFloat16>()[i]);
    case DataType::kInt32:
      return x.data<int32_t>()[i];
    case DataType::kInt64:
      return static_cast<double>(x.data<int64_t>()[i]);
    case DataType::kUInt8:
      return x.data<uint8_t>()[i];
    default:
      throw InvalidInput(fmt::format("Print cannot show {} values", DataTypeName(x.dtype())));
  }
}

class PrintOp : public Operator {
 public:
  PrintOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws),
        every_n_(IntArg("every_n")),
        limit_(IntArg("limit") ? IntArg("limit") : kDefaultLimit) {
    if (IntArg("to_file") != 0)
      FailOperator(def,
                   "to_file=1 is not supported: Print writes to stderr; pass to_file=0 and redirect stderr");
  }

  void Run() override {
    if (runs_++ % every_n_ != 0) return;
    const Tensor& x = Input(0);  // x is any shape, any numeric dtype
    const int64_t shown = std::min(x.numel(), limit_);
    std::string line =
        fmt::format("{} ({} {}):", InputName(0), DataTypeName(x.dtype()), ShapeToString(x.shape()));
    for (int64_t i = 0; i < shown; ++i) line += fmt::format(" {}", ValueAt(x, i));
    if (shown < x.numel()) line += fmt::format(" ... ({} more)", x.numel() - shown);
    fmt::print(stderr, "{}\n", line);
  }

 private:
  const int64_t every_n_, limit_;
  int64_t runs_ = 0;
};

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(Print)
    .SetDoc("Writes a tensor to stderr as one line: its name, dtype, shape and values (Caffe2's Print).")
    .Input(0, "tensor", "any shape, any numeric dtype")
    .Arg("to_file", ArgType::kInt, 0, "0 only: Caffe2's file per blob is not supported; redirect stderr")
    .Range(0, 1)
    .Arg("limit", ArgType::kInt, 0, "the values shown at most; 0: 1000")
    .Min(0)
    .Arg("every_n", ArgType::kInt, 1, "prints on the first run and every every_n-th after it")
    .Min(1)
    .ShapeFunction([](const OperatorDef&, const std::vector<TensorShape>&) {
      return std::vector<TensorShape>{};
    });
LOCKSTEP_REGISTER_CPU_OPERATOR(Print, PrintOp);
LOCKSTEP_NO_GRADIENT(Print);

}  // namespace lockstep
