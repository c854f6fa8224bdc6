// The gradient-op convention shared by the layers with a weight and a bias (Conv, FC):
// (X, W, dY) -> [dW unless no_dweight], [db unless no_bias], then dX when one more output is given.
// With a trained weight and bias this is Caffe2's (dW, db[, dX]); the flags let a frozen weight or bias,
// or a layer without bias, skip work. Weights, biases and their gradients are plain: the optimizer and
// checkpoints read them so.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lockstep/core/gradient.h"
#include "lockstep/core/schema.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

struct WeightGradientOutputs {
  bool dweight, dbias, dx;
};

// The outputs the flags ask for, in order dW, db, dX, through `output` (the operator's Output(i)); nullptr
// for those left out.
struct WeightGradientTensors {
  Tensor* dweight;
  Tensor* dbias;
  Tensor* dx;
};
template <typename OutputFunction>
WeightGradientTensors SelectWeightGradients(const WeightGradientOutputs& wants, OutputFunction output) {
  int next = 0;
  Tensor* dweight = wants.dweight ? output(next++) : nullptr;
  Tensor* dbias = wants.dbias ? output(next++) : nullptr;
  Tensor* dx = wants.dx ? output(next++) : nullptr;
  return {dweight, dbias, dx};
}

// Declares the schema of the gradient op of `forward`, whose inputs are (X, `weight`[, `bias`]), as the
// convention fixes it (for the schema's Include()): its doc, the inputs (X, W, dY), the outputs [dW], [db],
// [dX], the flags no_dweight and no_bias besides the forward op's arguments, and the shapes: dW has W's
// shape, db is (W.dim(0)), dX has X's shape.
std::function<void(OpSchema&)> DeclareWeightGradient(std::string forward, std::string weight,
                                                     std::string bias);

// Throws InvalidInput naming the operator when its output count does not fit its flags.
WeightGradientOutputs ParseWeightGradientOutputs(const OperatorDef& def);

// The gradient op `type` for the forward op in g, whose inputs are (X, W[, b]); writes only the needed GIs.
OperatorDef MakeWeightGradientOp(const std::string& type, const GradientContext& g);

// `parameter` itself when plain, else its values converted into `scratch` (for a weight some layout-aware
// operator produced).
const Tensor& PlainParameter(const Tensor& parameter, Tensor* scratch);

// Cost function of the forward op: multiply-adds, the output's elements times W's fan-in (W.dim(0) is the
// number of outputs per position).
double WeightedLayerCost(const OperatorDef& def, const std::vector<TensorShape>& in,
                         const std::vector<TensorShape>& out);

}  // namespace lockstep
