// Layer helpers: parameters + operators for the common layers.
#include "lockstep/model/layers.h"

namespace lockstep {

FillSpec FillSpec::Constant(float value) { return {"ConstantFill", {Arg("value", value)}}; }
FillSpec FillSpec::Gaussian(float std) { return {"GaussianFill", {Arg("mean", 0.0f), Arg("std", std)}}; }
FillSpec FillSpec::Xavier() { return {"XavierFill", {}}; }
FillSpec FillSpec::Msra() { return {"MSRAFill", {}}; }

namespace layers {

std::string Conv(ModelHelper& model, const std::string& in, const std::string& out, int dim_in, int dim_out,
                 int kernel, const ConvOptions& options) {
  if (dim_in < 1 || dim_out < 1 || kernel < 1)
    throw InvalidInput(
        fmt::format("conv '{}': channels and kernel must be at least 1, got {} in, {} out and kernel {}", out,
                    dim_in, dim_out, kernel));
  if (options.group < 1 || dim_in % options.group != 0 || dim_out % options.group != 0)
    throw InvalidInput(fmt::format("conv '{}': group {} must divide its channels, {} in and {} out", out,
                                   options.group, dim_in, dim_out));
  std::string output = model.Scoped(out);
  std::vector<std::string> inputs = {
      in, model.CreateParam(out + "_w", {dim_out, dim_in / options.group, kernel, kernel},
                            options.weight_init, ParamTag::kWeight)};
  if (options.bias)
    inputs.push_back(model.CreateParam(out + "_b", {dim_out}, options.bias_init, ParamTag::kBias));
  model.AddOp("Conv", inputs, {output},
              {Arg("kernel", kernel), Arg("stride", options.stride), Arg("pad", options.pad),
               Arg("dilation", options.dilation), Arg("group", options.group)});
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
  model.AddOp(type, {in}, {output}, args);
  return output;
}

std::string MaxPool(ModelHelper& model, const std::string& in, const std::string& out, int kernel, int stride,
                    int pad) {
  return Pool(model, "MaxPool", in, out, {Arg("kernel", kernel), Arg("stride", stride), Arg("pad", pad)});
}

std::string AveragePool(ModelHelper& model, const std::string& in, const std::string& out, int kernel,
                        int stride, int pad) {
  return Pool(model, "AveragePool", in, out, {Arg("kernel", kernel), Arg("stride", stride), Arg("pad", pad)});
}

std::string GlobalAveragePool(ModelHelper& model, const std::string& in, const std::string& out) {
  return Pool(model, "AveragePool", in, out, {Arg("global_pooling", 1)});
}

std::string SpatialBN(ModelHelper& model, const std::string& in, const std::string& out, int channels,
                      bool is_test, bool relu, float epsilon, float momentum) {
  std::string output = model.Scoped(out);
  std::string scale = model.CreateParam(out + "_s", {channels}, FillSpec::Constant(1), ParamTag::kWeight);
  std::string bias = model.CreateParam(out + "_b", {channels}, FillSpec::Constant(0), ParamTag::kBias);
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
