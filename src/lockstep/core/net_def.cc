// Building and reading OperatorDef / NetDef protobufs.
#include "lockstep/core/net_def.h"

#include <google/protobuf/text_format.h>

#include <fstream>
#include <sstream>

#include "lockstep/core/atomic_file.h"

namespace lockstep {

Arg::Arg(const std::string& name, int value) : Arg(name, static_cast<int64_t>(value)) {}
Arg::Arg(const std::string& name, int64_t value) {
  proto.set_name(name);
  proto.set_i(value);
}
Arg::Arg(const std::string& name, float value) {
  proto.set_name(name);
  proto.set_f(value);
}
Arg::Arg(const std::string& name, double value) : Arg(name, static_cast<float>(value)) {}
Arg::Arg(const std::string& name, bool value) : Arg(name, static_cast<int64_t>(value)) {}
Arg::Arg(const std::string& name, const char* value) : Arg(name, std::string(value)) {}
Arg::Arg(const std::string& name, const std::string& value) {
  proto.set_name(name);
  proto.set_s(value);
}
Arg::Arg(const std::string& name, const std::vector<int>& values) {
  proto.set_name(name);
  for (int v : values) proto.add_ints(v);
}
Arg::Arg(const std::string& name, const std::vector<int64_t>& values) {
  proto.set_name(name);
  for (int64_t v : values) proto.add_ints(v);
}
Arg::Arg(const std::string& name, const std::vector<float>& values) {
  proto.set_name(name);
  for (float v : values) proto.add_floats(v);
}

OperatorDef MakeOperatorDef(const std::string& type, const std::vector<std::string>& inputs,
                            const std::vector<std::string>& outputs, const std::vector<Arg>& args) {
  OperatorDef def;
  def.set_type(type);
  for (const auto& name : inputs) def.add_input(name);
  for (const auto& name : outputs) def.add_output(name);
  for (const auto& arg : args) *def.add_arg() = arg.proto;
  return def;
}

const Argument* FindArgument(const OperatorDef& def, const std::string& name) {
  for (const auto& arg : def.arg())
    if (arg.name() == name) return &arg;
  return nullptr;
}

bool HasArgument(const OperatorDef& def, const std::string& name) {
  return FindArgument(def, name) != nullptr;
}

namespace {
[[noreturn]] void WrongType(const OperatorDef& def, const std::string& name, const char* expected) {
  throw InvalidInput(fmt::format("argument '{}' of {} must be {}", name, DescribeOperator(def), expected));
}
}  // namespace

int64_t GetIntArgument(const OperatorDef& def, const std::string& name, int64_t default_value) {
  const Argument* arg = FindArgument(def, name);
  if (!arg) return default_value;
  if (!arg->has_i()) WrongType(def, name, "an integer");
  return arg->i();
}

float GetFloatArgument(const OperatorDef& def, const std::string& name, float default_value) {
  const Argument* arg = FindArgument(def, name);
  if (!arg) return default_value;
  if (arg->has_f()) return arg->f();
  if (arg->has_i()) return static_cast<float>(arg->i());
  WrongType(def, name, "a number");
}

std::string GetStringArgument(const OperatorDef& def, const std::string& name,
                              const std::string& default_value) {
  const Argument* arg = FindArgument(def, name);
  if (!arg) return default_value;
  if (!arg->has_s()) WrongType(def, name, "a string");
  return arg->s();
}

int64_t GetIntArgument(const NetDef& net, const std::string& name, int64_t default_value) {
  for (const auto& arg : net.arg()) {
    if (arg.name() != name) continue;
    if (!arg.has_i())
      throw InvalidInput(fmt::format("argument '{}' of net '{}' must be an integer", name, net.name()));
    return arg.i();
  }
  return default_value;
}

void SetArgument(NetDef* net, const Arg& arg) {
  for (auto& existing : *net->mutable_arg())
    if (existing.name() == arg.proto.name()) {
      existing = arg.proto;
      return;
    }
  *net->add_arg() = arg.proto;
}

std::vector<int64_t> GetIntsArgument(const OperatorDef& def, const std::string& name,
                                     const std::vector<int64_t>& default_value) {
  const Argument* arg = FindArgument(def, name);
  if (!arg) return default_value;
  return {arg->ints().begin(), arg->ints().end()};
}

std::vector<float> GetFloatsArgument(const OperatorDef& def, const std::string& name,
                                     const std::vector<float>& default_value) {
  const Argument* arg = FindArgument(def, name);
  if (!arg) return default_value;
  return {arg->floats().begin(), arg->floats().end()};
}

void SetArgument(OperatorDef* def, const Arg& arg) {
  for (auto& existing : *def->mutable_arg()) {
    if (existing.name() == arg.proto.name()) {
      existing = arg.proto;
      return;
    }
  }
  *def->add_arg() = arg.proto;
}

Device DeviceOf(const OperatorDef& def) {
  Device device;
  device.type = static_cast<DeviceType>(def.device_option().device_type());
  device.id = def.device_option().device_id();
  return device;
}

void SetDevice(OperatorDef* def, const Device& device) {
  def->mutable_device_option()->set_device_type(static_cast<int>(device.type));
  def->mutable_device_option()->set_device_id(device.id);
}

std::string DescribeOperator(const OperatorDef& def) {
  if (!def.debug_info().empty()) return def.debug_info();
  std::string out = def.type() + "(";
  for (int i = 0; i < def.input_size(); ++i) out += (i ? ", " : "") + def.input(i);
  out += ") -> ";
  for (int i = 0; i < def.output_size(); ++i) out += (i ? ", " : "") + def.output(i);
  return out;
}

void FailOperator(const OperatorDef& def, const std::string& what) {
  throw InvalidInput(fmt::format("{}: {}", DescribeOperator(def), what));
}

void CheckOneValue(const OperatorDef& def, const Tensor& tensor, DataType type, const std::string& what) {
  if (tensor.dtype() != type || tensor.numel() != 1)
    FailOperator(def, fmt::format("{}, got {} of shape {}", what, DataTypeName(tensor.dtype()),
                                  ShapeToString(tensor.shape())));
}

static bool IsTextPath(const std::string& path) {
  return path.size() > 6 && path.compare(path.size() - 6, 6, ".pbtxt") == 0;
}

NetDef ReadNetDef(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(fmt::format("cannot open net file {}", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ParseNetDef(buffer.str(), IsTextPath(path), path);
}

NetDef ParseNetDef(const std::string& bytes, bool text, const std::string& name) {
  NetDef net;
  bool ok = text ? google::protobuf::TextFormat::ParseFromString(bytes, &net) : net.ParseFromString(bytes);
  if (!ok) throw InvalidInput(fmt::format("{} is not a valid NetDef", name));
  return net;
}

void WriteNetDef(const NetDef& net, const std::string& path) {
  std::string bytes;
  if (IsTextPath(path)) {
    google::protobuf::TextFormat::PrintToString(net, &bytes);
  } else {
    net.SerializeToString(&bytes);
  }
  WriteFileAtomically(path, bytes, "net");
}

}  // namespace lockstep
