// Output selection of the Conv and FC gradient ops, and their plain view of parameters.
#include "lockstep/ops/weight_gradient.h"

namespace lockstep {

WeightGradientOutputs ParseWeightGradientOutputs(const OperatorDef& def) {
  bool dweight = IntArg(def, "no_dweight") == 0;
  bool dbias = IntArg(def, "no_bias") == 0;
  int named = dweight + dbias;
  if (def.output_size() != named && def.output_size() != named + 1)
    FailOperator(def, fmt::format("expects {} or {} outputs ([dW unless no_dweight], [db unless no_bias], "
                                  "then an optional dX), got {}",
                                  named, named + 1, def.output_size()));
  return {dweight, dbias, def.output_size() == named + 1};
}

OperatorDef MakeWeightGradientOp(const std::string& type, const GradientContext& g) {
  std::vector<Arg> args = g.Args();
  std::vector<std::string> outputs;
  if (g.NeedsGI(1))
    outputs.push_back(g.GI(1));
  else
    args.emplace_back("no_dweight", 1);
  if (g.def.input_size() == 3 && g.NeedsGI(2))
    outputs.push_back(g.GI(2));
  else
    args.emplace_back("no_bias", 1);
  if (g.NeedsGI(0)) outputs.push_back(g.GI(0));
  return MakeOperatorDef(type, {g.I(0), g.I(1), g.GO(0)}, outputs, args);
}

namespace {

std::vector<TensorShape> WeightGradientShapes(const OperatorDef& def, const std::vector<TensorShape>& in) {
  WeightGradientOutputs wants = ParseWeightGradientOutputs(def);
  std::vector<TensorShape> out;
  if (wants.dweight) out.push_back(in[1]);
  if (wants.dbias) out.push_back({{in[1].dims.at(0)}});
  if (wants.dx) out.push_back(in[0]);
  return out;
}

}  // namespace

std::function<void(OpSchema&)> DeclareWeightGradient(std::string forward, std::string weight,
                                                     std::string bias) {
  return [forward, weight, bias](OpSchema& schema) {
    schema
        .SetDoc(fmt::format("{}'s gradient: d{} unless no_dweight, d{} unless no_bias, then dX when one more "
                            "output is given.",
                            forward, weight, bias))
        .Input(0, "X", forward + "'s input")
        .Input(1, weight, forward + "'s weight")
        .Input(2, "dY", "gradient of " + forward + "'s output")
        .Output(0, "d" + weight, weight + "'s shape (the outputs skip what the flags leave out)")
        .OptionalOutput(1, "d" + bias, "(M)")
        .OptionalOutput(2, "dX", "X's shape")
        .ArgsOf(forward)
        .Arg("no_dweight", ArgType::kInt, 0, "1: the weight's gradient is not wanted and has no output")
        .Range(0, 1)
        .Arg("no_bias", ArgType::kInt, 0, "1: the bias's gradient is not wanted (or there is no bias)")
        .Range(0, 1)
        .ShapeFunction(WeightGradientShapes);
  };
}

const Tensor& PlainParameter(const Tensor& parameter, Tensor* scratch) {
  if (parameter.is_plain()) return parameter;
  parameter.ToPlain(scratch);
  return *scratch;
}

double WeightedLayerCost(const OperatorDef&, const std::vector<TensorShape>& in,
                         const std::vector<TensorShape>& out) {
  double written = 0;
  for (const auto& shape : out) written += static_cast<double>(NumElements(shape.dims));
  const Shape& w = in.at(1).dims;
  if (w.empty() || w[0] <= 0) return written;
  return written * static_cast<double>(NumElements(w) / w[0]);
}

}  // namespace lockstep
