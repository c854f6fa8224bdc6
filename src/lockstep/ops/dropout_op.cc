// Dropout: in training, zeroes each element with probability `ratio` and scales the kept ones by 1 / (1 -
// ratio) so that test mode is the identity. The op owns its generator, seeded from the device option, so a
// seed fixes every mask it draws.
#include "lockstep/ops/dropout_op.h"

#include <algorithm>
#include <cstdint>
#include <random>

#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"

namespace lockstep {

DropoutArgs ParseDropoutArgs(const OperatorDef& def) {
  float ratio = FloatArg(def, "ratio");
  if (IntArg(def, "is_test") != 0) return {ratio, true};
  if (def.type() == "Dropout" && def.output_size() != 2)
    FailOperator(def, "training mode needs the mask output (Y, mask)");
  if (def.type() == "DropoutGradient" && def.input_size() != 2)
    FailOperator(def, "training mode needs the mask input (dY, mask)");
  return {ratio, false};
}

void CheckDropoutMask(const OperatorDef& def, const Tensor& mask, const Tensor& dy) {
  if (mask.shape() != dy.shape() || mask.dtype() != DataType::kUInt8)
    FailOperator(def, fmt::format("mask must be uint8 of dY's shape {}, got {} {}", ShapeToString(dy.shape()),
                                  DataTypeName(mask.dtype()), ShapeToString(mask.shape())));
}

namespace {

class DropoutOp : public Operator {
 public:
  DropoutOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), args_(ParseDropoutArgs(def)), generator_(def.device_option().random_seed()) {}

  void Run() override {
    const Tensor& x = Input(0);  // x is any shape
    Tensor* y = Output(0);       // y has x's shape; it may be x itself
    if (args_.is_test) {
      y->CopyFrom(x);
      // The mask, when asked for, keeps everything so that it agrees with Y.
      if (OutputSize() == 2) {
        Output(1)->Resize(x.shape(), DataType::kUInt8);
        std::fill_n(Output(1)->data<uint8_t>(), x.numel(), uint8_t{1});
      }
      return;
    }
    Tensor* mask = Output(1);  // mask has x's shape: 1 where x is kept
    y->Resize(x.shape());
    mask->Resize(x.shape(), DataType::kUInt8);
    // Raw 32-bit draws against a threshold: mt19937's sequence is fixed by the standard, unlike
    // distributions'.
    const uint64_t threshold = args_.threshold();
    const float scale = args_.scale();
    const float* in = x.data<float>();
    float* out = y->data<float>();
    uint8_t* keep = mask->data<uint8_t>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      keep[i] = generator_() >= threshold;
      out[i] = keep[i] ? in[i] * scale : 0.f;
    }
  }

 private:
  const DropoutArgs args_;
  std::mt19937 generator_;
};

// dX = dY * mask / (1 - ratio) in training; dX = dY in test mode, where the mask is not read.
class DropoutGradientOp : public Operator {
 public:
  DropoutGradientOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), args_(ParseDropoutArgs(def)) {}

  void Run() override {
    const Tensor& dy = Input(0);  // dy is any shape
    Tensor* dx = Output(0);       // dx has dy's shape; it may be dy itself
    if (args_.is_test) {
      dx->CopyFrom(dy);
      return;
    }
    const Tensor& mask = Input(1);  // mask has dy's shape
    CheckDropoutMask(def_, mask, dy);
    dx->Resize(dy.shape());
    const float scale = args_.scale();
    const float* in = dy.data<float>();
    const uint8_t* keep = mask.data<uint8_t>();
    float* out = dx->data<float>();
    for (int64_t i = 0; i < dy.numel(); ++i) out[i] = keep[i] ? in[i] * scale : 0.f;
  }

 private:
  const DropoutArgs args_;
};

std::vector<OperatorDef> DropoutGradient(const GradientContext& g) {
  if (IntArg(g.def, "is_test") != 0)
    return {MakeOperatorDef("DropoutGradient", {g.GO(0)}, {g.GI(0)}, g.Args())};
  return {MakeOperatorDef("DropoutGradient", {g.GO(0), g.O(1)}, {g.GI(0)}, g.Args())};
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(Dropout)
    .SetDoc(
        "Training: zeroes each element with probability ratio and scales the others by 1 / (1 - ratio); "
        "test mode (is_test=1) is the identity. The mask is drawn from the device option's random_seed.")
    .Input(0, "X", "any shape")
    .Output(0, "Y", "X's shape; may be X")
    .OptionalOutput(1, "mask", "uint8 of X's shape, 1 where X is kept; needed in training")
    .Arg("ratio", ArgType::kFloat, 0.5f, "probability of dropping an element (all would leave none to scale)")
    .RangeBelow(0, 1)
    .Arg("is_test", ArgType::kInt, 0, "1: test mode, the identity")
    .Range(0, 1)
    .AllowInplace({{0, 0}})
    .ShapeFunction([](const OperatorDef& def, const std::vector<TensorShape>& in) {
      std::vector<TensorShape> out{in[0]};
      if (def.output_size() == 2) out.push_back({in[0].dims, DataType::kUInt8});
      return out;
    });
LOCKSTEP_OPERATOR_SCHEMA(DropoutGradient)
    .SetDoc("dX = dY * mask / (1 - ratio) in training, dY in test mode: Dropout's gradient.")
    .Input(0, "dY", "any shape")
    .OptionalInput(1, "mask", "Dropout's mask; needed in training")
    .Output(0, "dX", "dY's shape; may be dY")
    .ArgsOf("Dropout")
    .AllowInplace({{0, 0}})
    .IdentityShape();
LOCKSTEP_REGISTER_CPU_OPERATOR(Dropout, DropoutOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(DropoutGradient, DropoutGradientOp);
LOCKSTEP_REGISTER_GRADIENT(Dropout, DropoutGradient);

}  // namespace lockstep
