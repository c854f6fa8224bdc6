// Layer helpers: parameters + operators for the common layers.
#include "lockstep/model/layers.h"

#include <algorithm>
#include <map>
#include <set>

#include "lockstep/ops/conv_pool_args.h"

namespace lockstep {

FillSpec FillSpec::Constant(float value) { return {"ConstantFill", {Arg("value", value)}}; }
FillSpec FillSpec::Gaussian(float std) { return {"GaussianFill", {Arg("mean", 0.0f), Arg("std", std)}}; }
FillSpec FillSpec::Xavier() { return {"XavierFill", {}}; }
FillSpec FillSpec::Msra() { return {"MSRAFill", {}}; }

namespace layers {
namespace {

// The square window argument that a per-side one replaces: kernel for kernel_h, kernel_w and kernels, and
// likewise stride, pad and dilation.
std::string WindowRole(const std::string& layer, const std::string& name) {
  static const std::map<std::string, std::string> kRoles = {
      {"kernel_h", "kernel"},     {"kernel_w", "kernel"},   {"kernels", "kernel"}, {"stride_h", "stride"},
      {"stride_w", "stride"},     {"strides", "stride"},    {"pad_t", "pad"},      {"pad_l", "pad"},
      {"pad_b", "pad"},           {"pad_r", "pad"},         {"pads", "pad"},       {"dilation_h", "dilation"},
      {"dilation_w", "dilation"}, {"dilations", "dilation"}};
  auto role = kRoles.find(name);
  if (role == kRoles.end())
    throw InvalidInput(
        fmt::format("{}: '{}' is not a per-side window argument (kernel_h/kernel_w, "
                    "stride_h/stride_w, pad_t/pad_l/pad_b/pad_r, dilation_h/dilation_w, or "
                    "kernels, strides, pads, dilations)",
                    layer, name));
  return role->second;
}

// The square window arguments but those whose role `sides` spells per side, then `sides`.
std::vector<Arg> WithSides(const std::string& layer, std::vector<Arg> square, const WindowSides& sides) {
  std::set<std::string> replaced;
  for (const Arg& side : sides) replaced.insert(WindowRole(layer, side.proto.name()));
  square.erase(std::remove_if(square.begin(), square.end(),
                              [&](const Arg& arg) { return replaced.count(arg.proto.name()) > 0; }),
               square.end());
  square.insert(square.end(), sides.begin(), sides.end());
  return square;
}

}  // namespace

std::string Conv(ModelHelper& model, const std::string& in, const std::string& out, int dim_in, int dim_out,
                 int kernel, const ConvOptions& options) {
  const std::string layer = fmt::format("conv '{}'", out);
  if (dim_in < 1 || dim_out < 1)
    throw InvalidInput(
        fmt::format("{}: channels must be at least 1, got {} in and {} out", layer, dim_in, dim_out));
  if (options.group < 1 || dim_in % options.group != 0 || dim_out % options.group != 0)
    throw InvalidInput(fmt::format("{}: group {} must divide its channels, {} in and {} out", layer,
                                   options.group, dim_in, dim_out));
  std::vector<Arg> args = WithSides(layer,
                                    {Arg("kernel", kernel), Arg("stride", options.stride),
                                     Arg("pad", options.pad), Arg("dilation", options.dilation)},
                                    options.sides);
  args.push_back(Arg("group", options.group));
  std::string output = model.Scoped(out);
  // The filter's shape follows the window the operator will read; a window it would refuse (a kernel of 0,
  // stride_h without stride_w) is refused here, before the parameters.
  OperatorDef probe = MakeOperatorDef("Conv", {in, out + "_w"}, {output}, args);
  SchemaRegistry::Of(probe).Verify(probe);
  const ConvPoolArgs window = ParseConvPoolArgs(probe);
  std::vector<std::string> inputs = {
      in, model.CreateParam(out + "_w", {dim_out, dim_in / options.group, window.kernel_h, window.kernel_w},
                            options.weight_init, ParamTag::kWeight)};
  if (options.bias)
    inputs.push_back(model.CreateParam(out + "_b", {dim_out}, options.bias_init, ParamTag::kBias));
  model.AddOp("Conv", inputs, {output}, args);
  return output;
}

std::string FC(ModelHelper& model, const std::string& in, const std::string& out, int dim_in, int dim_out,
               const FillSpec& weight_init, const FillSpec& bias_init, int axis) {
  if (dim_in < 1 || dim_out < 1)
    throw InvalidInput(
        fmt::format("fc '{}': dimensions must be at least 1, got {} in and {} out", out, dim_in, dim_out));
  std::string output = model.Scoped(out);
  std::string w = model.CreateParam(out + "_w", {dim_out, dim_in}, weight_init, ParamTag::kWeight);
  std::string b = model.CreateParam(out + "_b", {dim_out}, bias_init, ParamTag::kBias);
  std::vector<Arg> args;
  if (axis != DefaultIntArg("FC", "axis")) args.push_back(Arg("axis", axis));
  model.AddOp("FC", {in, w, b}, {output}, args);
  return output;
}

std::string Relu(ModelHelper& model, const std::string& in, const std::string& out) {
  std::string output = model.Scoped(out);
  model.AddOp("Relu", {in}, {output});
  return output;
}

static std::string Pool(ModelHelper& model, const char* type, const std::string& in, const std::string& out,
                        std::vector<Arg> args) {
  std::string output = model.Scoped(out);
  OperatorDef op = MakeOperatorDef(type, {in}, {output}, args);
  SchemaRegistry::Of(op).Verify(op);
  ParsePoolArgs(op);  // a window the operator would refuse is refused here, where the layer is built
  model.AddOp(std::move(op));
  return output;
}

// `layer` names it in messages ("max_pool").
static std::string WindowedPool(ModelHelper& model, const char* type, const char* layer,
                                const std::string& in, const std::string& out, int kernel, int stride,
                                int pad, const WindowSides& sides) {
  return Pool(model, type, in, out,
              WithSides(fmt::format("{} '{}'", layer, out),
                        {Arg("kernel", kernel), Arg("stride", stride), Arg("pad", pad)}, sides));
}

std::string MaxPool(ModelHelper& model, const std::string& in, const std::string& out, int kernel, int stride,
                    int pad, const WindowSides& sides) {
  return WindowedPool(model, "MaxPool", "max_pool", in, out, kernel, stride, pad, sides);
}

std::string AveragePool(ModelHelper& model, const std::string& in, const std::string& out, int kernel,
                        int stride, int pad, const WindowSides& sides) {
  return WindowedPool(model, "AveragePool", "average_pool", in, out, kernel, stride, pad, sides);
}

std::string GlobalAveragePool(ModelHelper& model, const std::string& in, const std::string& out) {
  return Pool(model, "AveragePool", in, out, {Arg("global_pooling", 1)});
}

std::string SpatialBN(ModelHelper& model, const std::string& in, const std::string& out, int channels,
                      bool is_test, bool relu, float epsilon, float momentum, float init_scale,
                      float init_bias) {
  std::string output = model.Scoped(out);
  std::string scale =
      model.CreateParam(out + "_s", {channels}, FillSpec::Constant(init_scale), ParamTag::kWeight);
  std::string bias =
      model.CreateParam(out + "_b", {channels}, FillSpec::Constant(init_bias), ParamTag::kBias);
  std::string mean = model.CreateParam(out + "_rm", {channels}, FillSpec::Constant(0), ParamTag::kComputed);
  std::string var = model.CreateParam(out + "_riv", {channels}, FillSpec::Constant(1), ParamTag::kComputed);
  std::vector<std::string> outputs = {output};
  if (!is_test) outputs.insert(outputs.end(), {mean, var, output + "_sm", output + "_sv"});
  if (!is_test && relu) outputs.push_back(output + "_relu_mask");
  model.AddOp(
      "SpatialBN", {in, scale, bias, mean, var}, outputs,
      {Arg("is_test", is_test), Arg("epsilon", epsilon), Arg("momentum", momentum), Arg("relu", relu)});
  return output;
}

std::string Dropout(ModelHelper& model, const std::string& in, const std::string& out, float ratio,
                    bool is_test) {
  std::string output = model.Scoped(out);
  std::vector<std::string> outputs = {output};
  if (!is_test) outputs.push_back(output + "_mask");
  model.AddOp("Dropout", {in}, outputs, {Arg("ratio", ratio), Arg("is_test", is_test)});
  return output;
}

std::string Add(ModelHelper& model, const std::string& a, const std::string& b, const std::string& out) {
  std::string output = model.Scoped(out);
  model.AddOp("Add", {a, b}, {output});
  return output;
}

std::pair<std::string, std::string> ReadBatch(ModelHelper& model, const std::string& reader,
                                              const std::string& data, const std::string& label) {
  std::pair<std::string, std::string> outputs{model.Scoped(data), model.Scoped(label)};
  model.AddOp("ReadBatch", {}, {outputs.first, outputs.second},
              {Arg("reader", reader), Arg("replica", int64_t{model.replica().index})});
  return outputs;
}

std::string Scale(ModelHelper& model, const std::string& in, const std::string& out, float scale) {
  std::string output = model.Scoped(out);
  model.AddOp("Scale", {in}, {output}, {Arg("scale", scale)});
  return output;
}

std::string Flatten(ModelHelper& model, const std::string& in, const std::string& out) {
  std::string output = model.Scoped(out);
  model.AddOp("Flatten", {in}, {output});
  return output;
}

std::pair<std::string, std::string> SoftmaxWithLoss(ModelHelper& model, const std::string& logits,
                                                    const std::string& label, const std::string& softmax,
                                                    const std::string& loss) {
  std::pair<std::string, std::string> outputs = {model.Scoped(softmax), model.Scoped(loss)};
  model.AddOp("SoftmaxWithLoss", {logits, label}, {outputs.first, outputs.second});
  return outputs;
}

std::string Accuracy(ModelHelper& model, const std::string& predictions, const std::string& label,
                     const std::string& out, int top_k) {
  std::string output = model.Scoped(out);
  model.AddOp("Accuracy", {predictions, label}, {output}, {Arg("top_k", top_k)});
  return output;
}

}  // namespace layers
}  // namespace lockstep
