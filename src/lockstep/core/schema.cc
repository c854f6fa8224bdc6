// Schema registry and checks.
#include "lockstep/core/schema.h"

#include <memory>

#include "lockstep/core/net_def.h"

namespace lockstep {

OpSchema& OpSchema::NumInputs(int min, int max) {
  min_inputs_ = min;
  max_inputs_ = max;
  return *this;
}

OpSchema& OpSchema::NumOutputs(int min, int max) {
  min_outputs_ = min;
  max_outputs_ = max;
  return *this;
}

OpSchema& OpSchema::AllowInplace(std::set<std::pair<int, int>> pairs) {
  allow_inplace_ = std::move(pairs);
  return *this;
}

OpSchema& OpSchema::EnforceInplace(std::set<std::pair<int, int>> pairs) {
  enforce_inplace_ = std::move(pairs);
  return *this;
}

OpSchema& OpSchema::ShapeFunction(ShapeInference function) {
  infer_ = std::move(function);
  return *this;
}

OpSchema& OpSchema::IdentityShape() {
  return ShapeFunction([](const OperatorDef& def, const std::vector<TensorShape>& in) {
    std::vector<TensorShape> out;
    for (int i = 0; i < def.output_size(); ++i) out.push_back(in.at(i));
    return out;
  });
}

OpSchema& OpSchema::Collective() {
  collective_ = true;
  return *this;
}

OpSchema& OpSchema::ReadsAnyDevice() {
  reads_any_device_ = true;
  return *this;
}

OpSchema& OpSchema::TakesGpuOptions(unsigned options) {
  gpu_options_ = options;
  return *this;
}

OpSchema& OpSchema::SummedAcrossReplicas() {
  summed_across_replicas_ = true;
  return *this;
}

OpSchema& OpSchema::CostFunction(CostInference function) {
  cost_ = std::move(function);
  return *this;
}

double OpSchema::Cost(const OperatorDef& def, const std::vector<TensorShape>& inputs,
                      const std::vector<TensorShape>& outputs) const {
  if (cost_) return cost_(def, inputs, outputs);
  double written = 0;
  for (const auto& out : outputs) written += static_cast<double>(NumElements(out.dims));
  return written;
}

OpSchema& OpSchema::LowPrecisionInputs(std::set<int> inputs) {
  low_precision_inputs_ = std::move(inputs);
  any_low_precision_input_ = false;
  return *this;
}

bool OpSchema::AllowsLowPrecisionInput(int input) const {
  return any_low_precision_input_ || low_precision_inputs_.count(input) > 0;
}

OpSchema& OpSchema::CombineAcrossReplicas(ReplicaRewrite rewrite) {
  combine_ = std::move(rewrite);
  return *this;
}

static std::map<OpRole, std::string>& Roles() {
  static std::map<OpRole, std::string> roles;
  return roles;
}

OpSchema& OpSchema::Role(OpRole role) {
  auto [entry, added] = Roles().emplace(role, type_);
  LOCKSTEP_ENFORCE(added, "operators '{}' and '{}' claim the same role", entry->second, type_);
  return *this;
}

const std::string& SchemaRegistry::TypeFor(OpRole role) {
  auto it = Roles().find(role);
  LOCKSTEP_ENFORCE(it != Roles().end(), "no operator claims role {}", static_cast<int>(role));
  return it->second;
}

std::string CombinedName(const std::string& blob) { return blob + "_combined"; }

void SetGpuOptions(const GpuOptions& options, NetDef* net) {
  for (auto& op : *net->mutable_op()) {
    const unsigned takes = SchemaRegistry::Of(op).gpu_options();
    if (takes & kCudnnWorkspace) SetArgument(&op, Arg(kCudnnWorkspaceArg, options.cudnn_workspace_bytes));
    if (takes & kTensorCore) SetArgument(&op, Arg(kTensorCoreArg, options.enable_tensor_core));
    if (takes & kFloat16Compute) SetArgument(&op, Arg(kFloat16ComputeArg, options.float16_compute));
  }
}

static std::string Range(int min, int max) {
  if (min == max) return std::to_string(min);
  if (max == INT_MAX) return fmt::format("at least {}", min);
  return fmt::format("{} to {}", min, max);
}

bool IsCollective(const OperatorDef& op) {
  const OpSchema* schema = SchemaRegistry::Find(op.type());
  return schema && schema->collective();
}

bool IsObjectInput(const OperatorDef& op, int i) {
  const OpSchema* schema = SchemaRegistry::Find(op.type());
  return schema && schema->IsObjectInput(i);
}

bool IsObjectOutput(const OperatorDef& op, int i) {
  const OpSchema* schema = SchemaRegistry::Find(op.type());
  return schema && schema->IsObjectOutput(i);
}

void OpSchema::Verify(const OperatorDef& def) const {
  auto fail = [&](const std::string& what) {
    throw InvalidInput(fmt::format("{}: {}", DescribeOperator(def), what));
  };
  if (def.input_size() < min_inputs_ || def.input_size() > max_inputs_)
    fail(fmt::format("takes {} inputs, got {}", Range(min_inputs_, max_inputs_), def.input_size()));
  if (def.output_size() < min_outputs_ || def.output_size() > max_outputs_)
    fail(fmt::format("takes {} outputs, got {}", Range(min_outputs_, max_outputs_), def.output_size()));
  for (auto [in, out] : enforce_inplace_) {
    if (in < def.input_size() && out < def.output_size() && def.input(in) != def.output(out))
      fail(fmt::format("output {} must be the same blob as input {} (in-place)", out, in));
  }
  for (int in = 0; in < def.input_size(); ++in) {
    for (int out = 0; out < def.output_size(); ++out) {
      if (def.input(in) != def.output(out) || (inplace_shift_ >= 0 && in == out + inplace_shift_)) continue;
      if (!allow_inplace_.count({in, out}) && !enforce_inplace_.count({in, out}))
        fail(fmt::format("output {} may not overwrite input {} ('{}'): use another blob name", out, in,
                         def.input(in)));
    }
  }
}

std::vector<TensorShape> OpSchema::InferShapes(const OperatorDef& def,
                                               const std::vector<TensorShape>& in) const {
  if (!infer_) throw InvalidInput(fmt::format("operator {} has no shape function", type_));
  return infer_(def, in);
}

static std::map<std::string, std::unique_ptr<OpSchema>>& Schemas() {
  static std::map<std::string, std::unique_ptr<OpSchema>> schemas;
  return schemas;
}

OpSchema& SchemaRegistry::Register(const std::string& type) {
  auto& schemas = Schemas();
  LOCKSTEP_ENFORCE(!schemas.count(type), "schema for operator '{}' registered twice", type);
  return *(schemas[type] = std::make_unique<OpSchema>(type));
}

const OpSchema* SchemaRegistry::Find(const std::string& type) {
  auto it = Schemas().find(type);
  return it == Schemas().end() ? nullptr : it->second.get();
}

const OpSchema& SchemaRegistry::Of(const OperatorDef& def) {
  const OpSchema* schema = Find(def.type());
  if (!schema) throw InvalidInput(fmt::format("unknown operator type '{}'", def.type()));
  return *schema;
}

std::map<std::string, TensorShape> InferNetShapes(const NetDef& net,
                                                  std::map<std::string, TensorShape> shapes) {
  for (const auto& op : net.op()) {
    const OpSchema* schema = &SchemaRegistry::Of(op);
    std::vector<TensorShape> inputs;
    for (int i = 0; i < op.input_size(); ++i) {
      const std::string& name = op.input(i);
      if (schema->IsObjectInput(i)) {
        inputs.push_back({{}, DataType::kUndefined});
        continue;
      }
      auto it = shapes.find(name);
      if (it == shapes.end())
        throw InvalidInput(fmt::format("{}: shape of input '{}' is unknown", DescribeOperator(op), name));
      inputs.push_back(it->second);
    }
    auto outputs = schema->InferShapes(op, inputs);
    LOCKSTEP_ENFORCE_EQ(outputs.size(), static_cast<size_t>(op.output_size()), "shape function of {}",
                        op.type());
    for (int i = 0; i < op.output_size(); ++i) shapes[op.output(i)] = outputs[i];
  }
  return shapes;
}

}  // namespace lockstep
