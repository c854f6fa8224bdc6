// Mixed precision: casts around a forward pass, and loss-scale removal.
#include "lockstep/model/mixed_precision.h"

#include <map>

#include "lockstep/core/schema.h"
#include "lockstep/ops/op_defs.h"

namespace lockstep {

std::string ComputeInLowPrecision(ModelHelper& model, int first_op, const std::string& input,
                                  const std::string& output, DataType dtype) {
  if (dtype != DataType::kFloat16 && dtype != DataType::kBFloat16)
    throw InvalidInput(
        fmt::format("low-precision compute is float16 or bfloat16, not {}", DataTypeName(dtype)));
  NetDef& net = model.net();
  LOCKSTEP_ENFORCE(first_op >= 0 && first_op < net.op_size(), "first op {} of a net of {} ops", first_op,
                   net.op_size());
  const std::string suffix = dtype == DataType::kFloat16 ? "_fp16" : "_bf16";
  std::map<std::string, std::string> cast_of;  // float32 blob -> its low-precision copy
  NetDef rewritten = net;
  rewritten.clear_op();
  for (int i = 0; i < first_op; ++i) *rewritten.add_op() = net.op(i);
  auto cast = [&](const std::string& blob, const OperatorDef& reader) {
    auto [entry, added] = cast_of.emplace(blob, blob + suffix);
    if (added) {
      OperatorDef* op = rewritten.add_op();
      *op = CastDef(blob, entry->second, dtype);
      *op->mutable_device_option() = reader.device_option();
    }
    return entry->second;
  };
  // The casts of the input and the parameters come first (in order of first use), then the ops.
  std::vector<OperatorDef> ops(net.op().begin() + first_op, net.op().end());
  for (auto& op : ops) {
    const OpSchema& schema = SchemaRegistry::Of(op);
    for (int k = 0; k < op.input_size(); ++k) {
      if (!schema.AllowsLowPrecisionInput(k)) continue;
      const std::string& blob = op.input(k);
      bool is_param = false;
      for (const auto& param : model.params()) is_param |= param.name == blob;
      if (is_param && DeviceOf(op).type == DeviceType::kCpu && schema.CpuConvertsInput(k)) continue;
      if (is_param || blob == input) op.set_input(k, cast(blob, op));
    }
  }
  if (!cast_of.count(input))
    throw InvalidInput(fmt::format("the forward pass does not read its input '{}'", input));
  for (const auto& op : ops) *rewritten.add_op() = op;
  const std::string float_output = output + "_float";
  OperatorDef* back = rewritten.add_op();
  *back = CastDef(output, float_output, DataType::kFloat);
  *back->mutable_device_option() = ops.back().device_option();
  net = rewritten;
  return float_output;
}

void UnscaleGradients(ModelHelper& model, float loss_scale) {
  if (loss_scale == 1.0f) return;
  for (const auto& param : model.GetTrainableParams(model.name_scope())) {
    auto grad = model.param_to_grad().find(param);
    LOCKSTEP_ENFORCE(grad != model.param_to_grad().end(), "parameter '{}' has no gradient", param);
    ModelHelper::DeviceScope scope(model, model.Param(param).device);
    model.AddOp(ScaleDef(grad->second, grad->second, 1.0f / loss_scale));
  }
}

}  // namespace lockstep
