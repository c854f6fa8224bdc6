// The plan: shapes forward through both nets, sharing per scope (memonger), then each buffer's size is the
// largest of the blobs that share it, counted on the device of the op that first writes it.
#include "lockstep/parallel/memory_plan.h"

#include <algorithm>

#include "lockstep/core/net_def.h"
#include "lockstep/core/tensor.h"
#include "lockstep/parallel/memonger.h"

namespace lockstep {
namespace {

// Shapes of every blob that init_net and net write, in order; false (with why) when one is unknown: an op
// without a shape function whose outputs are not given, or a shape function that refuses its inputs.
bool InferShapes(const NetDef& init_net, const NetDef& net, std::map<std::string, TensorShape>* shapes,
                 std::string* why) {
  for (const NetDef* n : {&init_net, &net}) {
    for (const auto& op : n->op()) {
      const OpSchema& schema = SchemaRegistry::Of(op);
      if (!schema.HasShapeFunction()) {
        for (const auto& output : op.output())
          if (!shapes->count(output)) {
            *why =
                fmt::format("{} has no shape function and the shape of '{}' is not given", op.type(), output);
            return false;
          }
        continue;
      }
      std::vector<TensorShape> inputs;
      for (int k = 0; k < op.input_size(); ++k) {
        auto it = shapes->find(op.input(k));
        if (schema.IsObjectInput(k)) {
          inputs.push_back({{}, DataType::kUndefined});
        } else if (it != shapes->end()) {
          inputs.push_back(it->second);
        } else {
          *why = fmt::format("the shape of '{}', an input of {}, is unknown", op.input(k), op.type());
          return false;
        }
      }
      std::vector<TensorShape> outputs;
      try {
        outputs = schema.InferShapes(op, inputs);
      } catch (const std::exception& e) {
        *why = e.what();
        return false;
      }
      for (int k = 0; k < op.output_size() && k < static_cast<int>(outputs.size()); ++k)
        (*shapes)[op.output(k)] =
            schema.IsObjectOutput(k) ? TensorShape{{}, DataType::kUndefined} : outputs[k];
    }
  }
  return true;
}

size_t Bytes(const TensorShape& shape) {
  if (shape.dtype == DataType::kUndefined) return 0;
  return static_cast<size_t>(NumElements(shape.dims)) * ElementSize(shape.dtype);
}

}  // namespace

size_t MemoryPlan::Total() const {
  size_t total = 0;
  for (const auto& [device, use] : devices) total += use.Total();
  return total;
}

MemoryPlan PlanMemory(NetDef* net, const NetDef& init_net, const MemoryPlanOptions& options) {
  MemoryPlan plan;
  std::map<std::string, TensorShape> shapes = options.given;
  std::map<std::string, size_t> bytes;
  if (InferShapes(init_net, *net, &shapes, &plan.unknown)) {
    for (const auto& [name, shape] : shapes) bytes[name] = Bytes(shape);
  } else {
    plan.unknown = plan.unknown.empty() ? "a shape is unknown" : plan.unknown;
  }

  const NetDef original = *net;
  if (options.share) {
    for (const auto& scope : options.scopes) {
      MemongerOptions memonger;
      memonger.namescope = scope;
      memonger.keep = options.keep;
      memonger.share_activations = true;
      if (plan.unknown.empty())
        for (const auto& [name, size] : bytes)
          if (name.compare(0, scope.size(), scope) == 0) memonger.blob_bytes[name] = size;
      *net = ShareBlobs(*net, memonger);
    }
  }
  if (!plan.unknown.empty()) return plan;

  // Each buffer (a name of the rewritten net) holds the largest of its blobs, on the device of the op that
  // first writes it; init-net blobs are counted by kind, the net's by whether they share.
  std::map<std::string, std::string> device_of;
  auto note_device = [&](const OperatorDef& op, const std::string& name) {
    device_of.try_emplace(name, DeviceOf(op).ToString());
  };
  std::set<std::string> made_by_init;
  for (const auto& op : init_net.op())
    for (const auto& name : op.output()) {
      made_by_init.insert(name);
      note_device(op, name);
    }
  std::map<std::string, size_t> buffer_bytes;  // rewritten name -> largest blob
  std::map<std::string, std::string> buffer_device;
  for (int i = 0; i < original.op_size(); ++i) {
    const OperatorDef& before = original.op(i);
    const OperatorDef& after = net->op(i);
    for (int k = 0; k < before.output_size(); ++k) {
      const std::string& name = before.output(k);
      if (made_by_init.count(name)) continue;
      note_device(before, name);
      size_t& largest = buffer_bytes[after.output(k)];
      largest = std::max(largest, bytes[name]);
      buffer_device.try_emplace(after.output(k), device_of[name]);
    }
  }
  std::set<std::string> counted;
  for (const auto& name : made_by_init) {
    MemoryUse& use = plan.devices[device_of[name]];
    size_t size = bytes[name];
    (options.parameters.count(name) ? use.parameters : use.state) += size;
    counted.insert(name);
  }
  for (const auto& [name, size] : bytes) {
    if (counted.count(name) || !device_of.count(name)) continue;
    MemoryUse& use = plan.devices[device_of[name]];
    if (options.gradients.count(name))
      use.gradients += size;
    else
      use.unshared_activations += size;
  }
  for (const auto& [buffer, size] : buffer_bytes) {
    if (options.gradients.count(buffer)) continue;  // never shared, counted above
    plan.devices[buffer_device[buffer]].activations += size;
  }
  return plan;
}

std::string FormatBytes(double bytes) {
  if (bytes >= double(1 << 30)) return fmt::format("{:.2f} GiB", bytes / (1 << 30));
  if (bytes >= double(1 << 20)) return fmt::format("{:.1f} MiB", bytes / (1 << 20));
  return fmt::format("{:.0f} KiB", bytes / (1 << 10));
}

std::string DescribeMemoryPlan(const MemoryPlan& plan) {
  if (!plan.unknown.empty()) return fmt::format("sizes unknown ({})", plan.unknown);
  std::string text;
  for (const auto& [device, use] : plan.devices)
    text += fmt::format(
        "{} {}: parameters {}, optimizer state and statistics {}, gradients {}, activations and "
        "their gradients {} ({} without sharing)\n",
        device, FormatBytes(use.Total()), FormatBytes(use.parameters), FormatBytes(use.state),
        FormatBytes(use.gradients), FormatBytes(use.activations), FormatBytes(use.unshared_activations));
  if (plan.devices.size() > 1) text += fmt::format("all devices {}\n", FormatBytes(plan.Total()));
  return text;
}

}  // namespace lockstep
