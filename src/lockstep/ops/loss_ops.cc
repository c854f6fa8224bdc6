// Caffe2's loss building blocks, for programs that compose their own losses: SumElements and AveragedLoss
// (the sum or mean of all elements, as a scalar), SquaredL2Distance (half the squared distance of each row
// pair) and LabelCrossEntropy (-log of each row's probability of its label), with their gradients. Sums
// accumulate in double; everything is float32 in plain layout.
#include <algorithm>
#include <cmath>

#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/class_labels.h"

namespace lockstep {
namespace {

// Probabilities below this count as this, so a confidently wrong row costs -log(1e-20) = 46 rather than inf
// (Caffe2's kLOG_THRESHOLD).
constexpr float kMinProbability = 1e-20f;

void CheckFloat(const OperatorDef& def, int input, const Tensor& tensor) {
  if (tensor.dtype() != DataType::kFloat)
    FailOperator(def, fmt::format("'{}' is {}; {} computes in float32, so Cast it first", def.input(input),
                                  DataTypeName(tensor.dtype()), def.type()));
}

void CheckScalar(const OperatorDef& def, int input, const Tensor& tensor) {
  CheckFloat(def, input, tensor);
  if (tensor.numel() != 1)
    FailOperator(def, fmt::format("'{}' must be a float scalar, got {}", def.input(input),
                                  ShapeToString(tensor.shape())));
}

// SumElements (average from its argument) and AveragedLoss (always the mean): X -> a scalar.
class SumElementsOp : public Operator {
 public:
  SumElementsOp(const OperatorDef& def, Workspace* ws, bool average) : Operator(def, ws), average_(average) {}

  void Run() override {
    const Tensor& x = Input(0);  // x is any shape, float32
    CheckFloat(def_, 0, x);
    if (average_ && x.numel() == 0) FailOperator(def_, "X is empty; its mean is undefined");
    double total = 0;
    const float* data = x.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) total += data[i];
    Tensor* y = Output(0);  // y is a scalar
    y->Resize({});
    y->data<float>()[0] = static_cast<float>(average_ ? total / x.numel() : total);
  }

 private:
  const bool average_;
};

// (X, dY) -> dX = dY everywhere, divided by X's size for the mean.
class SumElementsGradientOp : public Operator {
 public:
  SumElementsGradientOp(const OperatorDef& def, Workspace* ws, bool average)
      : Operator(def, ws), average_(average) {}

  void Run() override {
    const Tensor& x = Input(0);   // x is the forward op's input
    const Tensor& dy = Input(1);  // dy is a scalar
    CheckScalar(def_, 1, dy);
    Tensor* dx = Output(0);  // dx has x's shape
    dx->Resize(x.shape());
    const float value = average_ ? dy.data<float>()[0] / x.numel() : dy.data<float>()[0];
    std::fill_n(dx->data<float>(), dx->numel(), value);
  }

 private:
  const bool average_;
};

class SumElements : public SumElementsOp {
 public:
  SumElements(const OperatorDef& def, Workspace* ws)
      : SumElementsOp(def, ws, lockstep::IntArg(def, "average") != 0) {}
};
class SumElementsGradient : public SumElementsGradientOp {
 public:
  SumElementsGradient(const OperatorDef& def, Workspace* ws)
      : SumElementsGradientOp(def, ws, lockstep::IntArg(def, "average") != 0) {}
};
class AveragedLoss : public SumElementsOp {
 public:
  AveragedLoss(const OperatorDef& def, Workspace* ws) : SumElementsOp(def, ws, true) {}
};
class AveragedLossGradient : public SumElementsGradientOp {
 public:
  AveragedLossGradient(const OperatorDef& def, Workspace* ws) : SumElementsGradientOp(def, ws, true) {}
};

// X and Y as (N, D): N is their first dim (1 for a scalar), D the rest.
std::pair<int64_t, int64_t> Rows(const Tensor& x) {
  const int64_t n = x.ndim() > 0 ? x.dim(0) : 1;
  return {n, n > 0 ? x.numel() / n : 0};
}

void CheckSameShape(const OperatorDef& def, const Tensor& x, const Tensor& y) {
  if (x.shape() != y.shape())
    FailOperator(def, fmt::format("X {} and Y {} must have the same shape", ShapeToString(x.shape()),
                                  ShapeToString(y.shape())));
}

// (X, Y) -> distance (N): 0.5 * sum over each row of (X - Y)^2.
class SquaredL2DistanceOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& x = Input(0);  // x is (N, ...), float32
    const Tensor& y = Input(1);  // y has x's shape
    CheckFloat(def_, 0, x);
    CheckFloat(def_, 1, y);
    CheckSameShape(def_, x, y);
    const auto [n, d] = Rows(x);
    Tensor* distance = Output(0);  // distance is (N)
    distance->Resize({n});
    for (int64_t i = 0; i < n; ++i) {
      double total = 0;
      for (int64_t j = i * d; j < (i + 1) * d; ++j) {
        const double difference = x.data<float>()[j] - y.data<float>()[j];
        total += difference * difference;
      }
      distance->data<float>()[i] = static_cast<float>(total / 2);
    }
  }
};

// (X, Y, dDistance) -> dX = (X - Y) * dDistance[row], dY = -dX.
class SquaredL2DistanceGradientOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& x = Input(0);          // x is (N, ...)
    const Tensor& y = Input(1);          // y has x's shape
    const Tensor& ddistance = Input(2);  // ddistance is (N)
    CheckSameShape(def_, x, y);
    CheckFloat(def_, 2, ddistance);
    const auto [n, d] = Rows(x);
    if (ddistance.shape() != Shape{n})
      FailOperator(def_, fmt::format("dDistance must be ({}), got {}", n, ShapeToString(ddistance.shape())));
    Tensor* dx = Output(0);  // dx has x's shape
    Tensor* dy = Output(1);  // dy has x's shape
    dx->Resize(x.shape());
    dy->Resize(x.shape());
    for (int64_t j = 0; j < x.numel(); ++j) {
      const float gradient = (x.data<float>()[j] - y.data<float>()[j]) * ddistance.data<float>()[j / d];
      dx->data<float>()[j] = gradient;
      dy->data<float>()[j] = -gradient;
    }
  }
};

// (X, label) -> Y (N) = -log(X[i, label[i]]), X being probabilities (N, D).
class LabelCrossEntropyOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& x = Input(0);       // x is (N, D) float32
    const Tensor& labels = Input(1);  // labels is (N) or (N, 1) int32 in [0, D)
    CheckFloat(def_, 0, x);
    CheckClassLabelShapes(def_, "X", x.shape(), labels.shape(), labels.dtype());
    const int64_t n = x.dim(0), d = x.dim(1);
    Tensor* y = Output(0);  // y is (N)
    y->Resize({n});
    for (int64_t i = 0; i < n; ++i) {
      const float probability =
          x.data<float>()[i * d + CheckedClassLabel(def_, labels.data<int32_t>(), i, d)];
      y->data<float>()[i] = -std::log(std::max(probability, kMinProbability));
    }
  }
};

// (X, label, dY) -> dX: -dY[i] / X[i, label[i]] at each row's label, 0 elsewhere.
class LabelCrossEntropyGradientOp : public Operator {
 public:
  using Operator::Operator;

  void Run() override {
    const Tensor& x = Input(0);       // x is (N, D)
    const Tensor& labels = Input(1);  // labels is (N) or (N, 1)
    const Tensor& dy = Input(2);      // dy is (N)
    CheckClassLabelShapes(def_, "X", x.shape(), labels.shape(), labels.dtype());
    CheckFloat(def_, 2, dy);
    const int64_t n = x.dim(0), d = x.dim(1);
    if (dy.shape() != Shape{n})
      FailOperator(def_, fmt::format("dY must be ({}), got {}", n, ShapeToString(dy.shape())));
    Tensor* dx = Output(0);  // dx has x's shape
    dx->Resize(x.shape());
    std::fill_n(dx->data<float>(), dx->numel(), 0.f);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t at = i * d + CheckedClassLabel(def_, labels.data<int32_t>(), i, d);
      dx->data<float>()[at] = -dy.data<float>()[i] / std::max(x.data<float>()[at], kMinProbability);
    }
  }
};

std::vector<OperatorDef> SumElementsGradientMaker(const GradientContext& g) {
  return {MakeOperatorDef(g.def.type() + "Gradient", {g.I(0), g.GO(0)}, {g.GI(0)}, g.Args())};
}

std::vector<OperatorDef> SquaredL2DistanceGradientMaker(const GradientContext& g) {
  // Both outputs are always written; an input without a gradient gets a name nobody reads.
  const std::string dx = g.NeedsGI(0) ? g.GI(0) : "_" + g.GO(0) + "_dX";
  const std::string dy = g.NeedsGI(1) ? g.GI(1) : "_" + g.GO(0) + "_dY";
  return {MakeOperatorDef("SquaredL2DistanceGradient", {g.I(0), g.I(1), g.GO(0)}, {dx, dy})};
}

std::vector<OperatorDef> LabelCrossEntropyGradientMaker(const GradientContext& g) {
  return {MakeOperatorDef("LabelCrossEntropyGradient", {g.I(0), g.I(1), g.GO(0)}, {g.GI(0)})};
}

std::vector<TensorShape> ScalarShape(const OperatorDef&, const std::vector<TensorShape>&) {
  return {{{}, DataType::kFloat}};
}

// One distance or loss per row of input 0.
std::vector<TensorShape> PerRowShape(const OperatorDef&, const std::vector<TensorShape>& in) {
  return {{{in[0].dims.empty() ? 1 : in[0].dims[0]}, DataType::kFloat}};
}

void DeclareSumElements(OpSchema& schema) {
  schema.Input(0, "X", "any shape, float32")
      .Output(0, "sum", "a float scalar")
      .ShapeFunction(ScalarShape);
}

void DeclareSumElementsGradient(OpSchema& schema) {
  schema.Input(0, "X", "the forward op's input")
      .Input(1, "dsum", "a float scalar")
      .Output(0, "dX", "X's shape")
      .IdentityShape();
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(SumElements)
    .SetDoc("sum = the sum of all elements of X, or their mean with average=1 (Caffe2's SumElements).")
    .Include(DeclareSumElements)
    .Arg("average", ArgType::kInt, 0, "1: the mean instead of the sum")
    .Range(0, 1);
LOCKSTEP_OPERATOR_SCHEMA(SumElementsGradient)
    .SetDoc("dX = dsum everywhere, divided by X's size with average=1: SumElements' gradient.")
    .Include(DeclareSumElementsGradient)
    .ArgsOf("SumElements");
LOCKSTEP_OPERATOR_SCHEMA(AveragedLoss)
    .SetDoc("loss = the mean of all elements of X (Caffe2's AveragedLoss, e.g. of per-row losses).")
    .Include(DeclareSumElements);
LOCKSTEP_OPERATOR_SCHEMA(AveragedLossGradient)
    .SetDoc("dX = dloss / X's size everywhere: AveragedLoss' gradient.")
    .Include(DeclareSumElementsGradient);
LOCKSTEP_OPERATOR_SCHEMA(SquaredL2Distance)
    .SetDoc("distance[i] = 0.5 * the sum over row i of (X - Y)^2, rows being the first dim (Caffe2's).")
    .Input(0, "X", "(N, ...) float32")
    .Input(1, "Y", "X's shape")
    .Output(0, "distance", "(N)")
    .ShapeFunction(PerRowShape);
LOCKSTEP_OPERATOR_SCHEMA(SquaredL2DistanceGradient)
    .SetDoc("dX = (X - Y) * ddistance of the row, dY = -dX: SquaredL2Distance's gradient.")
    .Input(0, "X", "(N, ...)")
    .Input(1, "Y", "X's shape")
    .Input(2, "ddistance", "(N)")
    .Output(0, "dX", "X's shape")
    .Output(1, "dY", "X's shape")
    .IdentityShape();
LOCKSTEP_OPERATOR_SCHEMA(LabelCrossEntropy)
    .SetDoc(
        "Y[i] = -log(X[i, label[i]]) of probabilities X (e.g. a Softmax's), each at least 1e-20 (Caffe2's "
        "LabelCrossEntropy).")
    .Input(0, "X", "(N, D) float32 probabilities")
    .Input(1, "label", "(N) or (N, 1) int32 in [0, D)")
    .Output(0, "Y", "(N)")
    .ShapeFunction([](const OperatorDef& def, const std::vector<TensorShape>& in) {
      CheckClassLabelShapes(def, "X", in[0].dims, in[1].dims, in[1].dtype);
      return PerRowShape(def, in);
    });
LOCKSTEP_OPERATOR_SCHEMA(LabelCrossEntropyGradient)
    .SetDoc("dX = -dY[i] / X[i, label[i]] at each row's label, 0 elsewhere: LabelCrossEntropy's gradient.")
    .Input(0, "X", "(N, D)")
    .Input(1, "label", "(N) or (N, 1) int32")
    .Input(2, "dY", "(N)")
    .Output(0, "dX", "(N, D)")
    .IdentityShape();
LOCKSTEP_REGISTER_CPU_OPERATOR(SumElements, SumElements);
LOCKSTEP_REGISTER_CPU_OPERATOR(SumElementsGradient, SumElementsGradient);
LOCKSTEP_REGISTER_CPU_OPERATOR(AveragedLoss, AveragedLoss);
LOCKSTEP_REGISTER_CPU_OPERATOR(AveragedLossGradient, AveragedLossGradient);
LOCKSTEP_REGISTER_CPU_OPERATOR(SquaredL2Distance, SquaredL2DistanceOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(SquaredL2DistanceGradient, SquaredL2DistanceGradientOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(LabelCrossEntropy, LabelCrossEntropyOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(LabelCrossEntropyGradient, LabelCrossEntropyGradientOp);
LOCKSTEP_REGISTER_GRADIENT(SumElements, SumElementsGradientMaker);
LOCKSTEP_REGISTER_GRADIENT(AveragedLoss, SumElementsGradientMaker);
LOCKSTEP_REGISTER_GRADIENT(SquaredL2Distance, SquaredL2DistanceGradientMaker);
LOCKSTEP_REGISTER_GRADIENT(LabelCrossEntropy, LabelCrossEntropyGradientMaker);

}  // namespace lockstep
