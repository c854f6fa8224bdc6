// Operator base and the (type, device, engine) registry.
#include "lockstep/core/operator.h"

#include <map>
#include <tuple>

#include "lockstep/core/device_backend.h"
#include "lockstep/core/schema.h"

namespace lockstep {

namespace {
using RegistryKey = std::tuple<std::string, int, std::string>;
std::map<RegistryKey, OperatorFactory>& Factories() {
  static std::map<RegistryKey, OperatorFactory> factories;
  return factories;
}
}  // namespace

Operator::Operator(const OperatorDef& def, Workspace* ws) : def_(def), ws_(ws), device_(DeviceOf(def)) {
  const OpSchema* schema = SchemaRegistry::Find(def.type());
  LOCKSTEP_ENFORCE(schema != nullptr, "operator '{}' has an implementation but no schema", def.type());
  schema->Verify(def);
  // Objects live in the workspace's object store; the op looks them up itself (Workspace::FindObject).
  for (int i = 0; i < def.input_size(); ++i)
    inputs_.push_back(schema->IsObjectInput(i) ? nullptr : ws->CreateBlob(def.input(i)));
  for (int i = 0; i < def.output_size(); ++i)
    outputs_.push_back(schema->IsObjectOutput(i) ? nullptr : ws->CreateBlob(def.output(i)));
}

const Tensor& Operator::InputAsStored(int i) const {
  const Tensor* tensor = inputs_.at(i);
  LOCKSTEP_ENFORCE(tensor != nullptr, "{}: input {} names a workspace object, not a tensor",
                   DescribeOperator(def_), i);
  if (!tensor->defined())
    throw InvalidInput(
        fmt::format("{}: input '{}' has not been set (feed it or run the net that fills it first)",
                    DescribeOperator(def_), def_.input(i)));
  return *tensor;
}

const Tensor& Operator::Input(int i) {
  const Tensor* tensor = &InputAsStored(i);
  const bool here = device_.type == DeviceType::kCpu ? tensor->on_host() : tensor->device() == device_;
  if (here && (tensor->is_plain() || accepts_layouts_)) return *tensor;
  plain_inputs_.resize(inputs_.size());
  plain_inputs_[i].PlaceOn(device_);
  tensor->ToPlain(&plain_inputs_[i]);
  return plain_inputs_[i];
}

void OperatorRegistry::Register(const std::string& type, DeviceType device, const std::string& engine,
                                OperatorFactory factory) {
  RegistryKey key{type, static_cast<int>(device), engine};
  LOCKSTEP_ENFORCE(!Factories().count(key), "operator '{}' (engine '{}') registered twice", type, engine);
  Factories()[key] = std::move(factory);
}

std::vector<std::string> OperatorRegistry::Types(DeviceType device) {
  std::vector<std::string> types;
  for (const auto& entry : Factories())
    if (std::get<1>(entry.first) == static_cast<int>(device) && std::get<2>(entry.first).empty())
      types.push_back(std::get<0>(entry.first));
  return types;
}

std::unique_ptr<Operator> CreateOperator(const OperatorDef& def, Workspace* ws) {
  int device = def.device_option().device_type();
  auto& factories = Factories();
  auto it = factories.find({def.type(), device, def.engine()});
  if (it == factories.end()) it = factories.find({def.type(), device, ""});
  if (it == factories.end()) {
    SchemaRegistry::Of(def);  // an unknown type is refused naming the closest known ones
    const bool cuda = device == static_cast<int>(DeviceType::kCuda);
    if (cuda && !FindDeviceBackend(DeviceType::kCuda))
      throw InvalidInput(
          fmt::format("{} is placed on {}, but this lockstep was built without CUDA (LOCKSTEP_CUDA=OFF); "
                      "place it on the CPU",
                      DescribeOperator(def), DeviceOf(def).ToString()));
    throw InvalidInput(fmt::format(
        "{}: operator '{}' has no {} implementation; place it on a device that has one (its device_option), "
        "e.g. the CPU",
        DescribeOperator(def), def.type(), cuda ? "CUDA" : "CPU"));
  }
  try {
    return it->second(def, ws);
  } catch (const InvalidInput& e) {
    ThrowNamingOperator(def, e);
  }
}

void ThrowNamingOperator(const OperatorDef& def, const InvalidInput& e) {
  const std::string operator_name = DescribeOperator(def);
  if (std::string(e.what()).find(operator_name) != std::string::npos) throw;
  throw InvalidInput(fmt::format("{}: {}", operator_name, e.what()));
}

}  // namespace lockstep
