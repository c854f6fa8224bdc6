// Helpers over the protobuf graph: build OperatorDefs, read typed arguments, read/write nets as text or
// binary.
#pragma once

#include <string>
#include <vector>

#include "lockstep.pb.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

// One named argument of an operator, as a value that converts from the usual C++ types.
struct Arg {
  Arg(const std::string& name, int value);
  Arg(const std::string& name, int64_t value);
  Arg(const std::string& name, float value);
  Arg(const std::string& name, double value);
  Arg(const std::string& name, bool value);
  Arg(const std::string& name, const char* value);
  Arg(const std::string& name, const std::string& value);
  Arg(const std::string& name, const std::vector<int>& values);
  Arg(const std::string& name, const std::vector<int64_t>& values);
  Arg(const std::string& name, const std::vector<float>& values);
  Argument proto;
};

OperatorDef MakeOperatorDef(const std::string& type, const std::vector<std::string>& inputs,
                            const std::vector<std::string>& outputs, const std::vector<Arg>& args = {});

// Typed argument lookup; a missing argument yields the default, a wrongly typed one is an error.
const Argument* FindArgument(const OperatorDef& def, const std::string& name);
bool HasArgument(const OperatorDef& def, const std::string& name);
int64_t GetIntArgument(const OperatorDef& def, const std::string& name, int64_t default_value);
float GetFloatArgument(const OperatorDef& def, const std::string& name, float default_value);
std::string GetStringArgument(const OperatorDef& def, const std::string& name,
                              const std::string& default_value);
std::vector<int64_t> GetIntsArgument(const OperatorDef& def, const std::string& name,
                                     const std::vector<int64_t>& default_value = {});
std::vector<float> GetFloatsArgument(const OperatorDef& def, const std::string& name,
                                     const std::vector<float>& default_value = {});
void SetArgument(OperatorDef* def, const Arg& arg);  // replaces an argument of the same name
// Net-level arguments (executor settings).
int64_t GetIntArgument(const NetDef& net, const std::string& name, int64_t default_value);
void SetArgument(NetDef* net, const Arg& arg);

Device DeviceOf(const OperatorDef& def);
void SetDevice(OperatorDef* def, const Device& device);

// "Conv(data, conv1_w, conv1_b) -> conv1" for error messages, with the blob names as the model built them
// (debug_info, where the memory plan renamed them to shared buffers).
std::string DescribeOperator(const OperatorDef& def);
// Throws InvalidInput "<operator>: <what>".
[[noreturn]] void FailOperator(const OperatorDef& def, const std::string& what);
// Unless tensor holds exactly one value of `type`, fails with "<what>, got <dtype> of shape <shape>".
void CheckOneValue(const OperatorDef& def, const Tensor& tensor, DataType type, const std::string& what);

// Nets in files: ".pbtxt" is protobuf text format, anything else binary.
NetDef ReadNetDef(const std::string& path);
// The same on bytes already in memory; `name` only names them in the error.
NetDef ParseNetDef(const std::string& bytes, bool text, const std::string& name);
void WriteNetDef(const NetDef& net, const std::string& path);

}  // namespace lockstep
