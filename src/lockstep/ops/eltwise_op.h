// Unary element-wise operators on oneDNN's eltwise primitives (Relu, LeakyRelu, Sigmoid, Tanh, Sqr), which
// compute in whatever layout and dtype X comes and leave Y in it. Each type is one algorithm; its gradient op
// reads the forward op's output Y for oneDNN's *_use_dst_for_bwd algorithms (so the forward op may run in
// place) and its input X otherwise.
#pragma once

#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/dnnl_utils.h"

namespace lockstep {

// X -> Y = f(X); `alpha` is the algorithm's parameter (LeakyRelu's slope).
class EltwiseOp : public Operator {
 public:
  EltwiseOp(const OperatorDef& def, Workspace* ws, dnnl::algorithm algorithm, float alpha = 0);
  void Run() override;

 private:
  const dnnl::algorithm algorithm_;
  const float alpha_;
  dnnl::memory::desc desc_;
  dnnl::eltwise_forward primitive_;
};

// (Z, dY) -> dX = dY * f'(X), where Z is Y for the *_use_dst_for_bwd algorithms and X otherwise.
class EltwiseGradientOp : public Operator {
 public:
  EltwiseGradientOp(const OperatorDef& def, Workspace* ws, dnnl::algorithm algorithm, float alpha = 0);
  void Run() override;

 private:
  const dnnl::algorithm algorithm_;
  const float alpha_;
  const bool from_output_;
  dnnl::memory::desc desc_;
  dnnl::eltwise_backward primitive_;
};

// The operator classes of one algorithm without parameter, for registration.
template <dnnl::algorithm kAlgorithm>
class Eltwise : public EltwiseOp {
 public:
  Eltwise(const OperatorDef& def, Workspace* ws) : EltwiseOp(def, ws, kAlgorithm) {}
};
template <dnnl::algorithm kAlgorithm>
class EltwiseGradient : public EltwiseGradientOp {
 public:
  EltwiseGradient(const OperatorDef& def, Workspace* ws) : EltwiseGradientOp(def, ws, kAlgorithm) {}
};

// The gradient maker of type T: one "TGradient" op reading (Y, dY) or (X, dY), with T's arguments.
std::vector<OperatorDef> EltwiseGradientFromOutput(const GradientContext& g);
std::vector<OperatorDef> EltwiseGradientFromInput(const GradientContext& g);

// For an op with a ReLU folded in (relu=1: Conv, Add): appends ReluGradient(Y, dY) to `ops` and returns the
// gradient it writes, that of the op's output before the ReLU.
std::string GradientBeforeFusedRelu(const GradientContext& g, std::vector<OperatorDef>* ops);

// Schemas: X -> Y, which may run in place (its gradient reads Y); and the gradients' (Y, dY) -> dX and
// (X, dY) -> dX, dX in place of dY or not.
void DeclareEltwiseInPlace(OpSchema& schema);
void DeclareEltwiseGradientFromOutput(OpSchema& schema);
void DeclareEltwiseGradientFromInput(OpSchema& schema);

}  // namespace lockstep
