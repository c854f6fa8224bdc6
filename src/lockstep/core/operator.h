// Operator: one node of the graph bound to its workspace blobs. Construction resolves blobs, checks the
// schema and reads arguments; Run() only computes. Implementations register per (type, device, engine).
// Where they live: an operator that computes on a GPU has its CUDA class in ops/cuda/<family>.cc|cu, beside
// the CPU class in ops/<family>.cc; one that only moves data or metadata (Copy, Flatten, Reshape, ResizeLike,
// ReadBatch) is a single class in ops/<family>.cc, registered for both devices.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lockstep.pb.h"
#include "lockstep/core/net_def.h"
#include "lockstep/core/schema.h"
#include "lockstep/core/tensor.h"
#include "lockstep/core/workspace.h"

namespace lockstep {

class Operator {
 public:
  Operator(const OperatorDef& def, Workspace* ws);
  virtual ~Operator() = default;
  virtual void Run() = 0;

  const OperatorDef& def() const { return def_; }
  int InputSize() const { return static_cast<int>(inputs_.size()); }
  int OutputSize() const { return static_cast<int>(outputs_.size()); }

 protected:
  // Inputs must exist and hold data when the operator runs. An input in a backend layout reaches an operator
  // that did not call AcceptLayouts() as a plain copy; one in another device's memory, as a copy in this
  // operator's (placed nets carry explicit Copy ops instead, see parallel/placement.h).
  const Tensor& Input(int i);
  // The input as the workspace stores it, in any memory and layout: for operators that move data between
  // memories themselves (Copy), so that it is not staged first.
  const Tensor& InputAsStored(int i) const;
  // For operators that read backend layouts themselves (oneDNN primitives accept them directly).
  void AcceptLayouts() { accepts_layouts_ = true; }
  // Outputs live in the memory of the operator's device.
  Tensor* Output(int i) {
    Tensor* output = outputs_.at(i);
    LOCKSTEP_ENFORCE(output != nullptr, "{}: output {} names a workspace object, not a tensor",
                     DescribeOperator(def_), i);
    output->PlaceOn(device());
    return output;
  }
  const std::string& InputName(int i) const { return def_.input(i); }
  bool IsInplace(int input, int output) const { return def_.input(input) == def_.output(output); }
  const Device& device() const { return device_; }

  // The op's arguments, given or the schema's defaults (see IntArg(def, name) in schema.h).
  int64_t IntArg(const std::string& name) const { return lockstep::IntArg(def_, name); }
  float FloatArg(const std::string& name) const { return lockstep::FloatArg(def_, name); }
  std::string StringArg(const std::string& name) const { return lockstep::StringArg(def_, name); }
  std::vector<int64_t> IntsArg(const std::string& name) const { return lockstep::IntsArg(def_, name); }
  std::vector<float> FloatsArg(const std::string& name) const { return lockstep::FloatsArg(def_, name); }

  OperatorDef def_;
  Workspace* ws_;

 private:
  Device device_;
  std::vector<Tensor*> inputs_;   // nullptr for an object input (OpSchema::ObjectInputs)
  std::vector<Tensor*> outputs_;  // nullptr for an object output
  bool accepts_layouts_ = false;
  std::vector<Tensor> plain_inputs_;  // conversion buffers, kept across runs
};

using OperatorFactory = std::function<std::unique_ptr<Operator>(const OperatorDef&, Workspace*)>;

class OperatorRegistry {
 public:
  // Refuses a second registration of the same (type, device, engine).
  static void Register(const std::string& type, DeviceType device, const std::string& engine,
                       OperatorFactory factory);
  static std::vector<std::string> Types(DeviceType device);
};

// Creates the operator for def: the requested engine if registered, else the default engine of its device.
// An unknown type is an error that lists the known ones.
std::unique_ptr<Operator> CreateOperator(const OperatorDef& def, Workspace* ws);

// From the handler of `e`, thrown while def's operator was created or run: rethrows it, naming the operator
// first where its message does not name it (most do; a helper the operator calls may not).
[[noreturn]] void ThrowNamingOperator(const OperatorDef& def, const InvalidInput& e);

template <class OperatorClass>
struct OperatorRegisterer {
  OperatorRegisterer(const char* type, DeviceType device, const char* engine) {
    OperatorRegistry::Register(type, device, engine, [](const OperatorDef& def, Workspace* ws) {
      return std::unique_ptr<Operator>(new OperatorClass(def, ws));
    });
  }
};

}  // namespace lockstep

#define LOCKSTEP_REGISTER_OPERATOR_(type, device, engine, ...)              \
  static ::lockstep::OperatorRegisterer<__VA_ARGS__> LOCKSTEP_SCHEMA_NAME_( \
      registerer_##type##_, __COUNTER__)(#type, device, engine)
#define LOCKSTEP_REGISTER_CPU_OPERATOR(type, ...) \
  LOCKSTEP_REGISTER_OPERATOR_(type, ::lockstep::DeviceType::kCpu, "", __VA_ARGS__)
#define LOCKSTEP_REGISTER_CUDA_OPERATOR(type, ...) \
  LOCKSTEP_REGISTER_OPERATOR_(type, ::lockstep::DeviceType::kCuda, "", __VA_ARGS__)
#define LOCKSTEP_REGISTER_CPU_OPERATOR_WITH_ENGINE(type, engine, ...) \
  LOCKSTEP_REGISTER_OPERATOR_(type, ::lockstep::DeviceType::kCpu, #engine, __VA_ARGS__)
