// The plan: shapes forward through both nets, then per scope (a replica's device) the memonger places the
// blobs in one arena (or, without sizes, gives blobs with disjoint lifetimes one name); every blob is counted
// on the device of the op that first writes it.
#include "lockstep/parallel/memory_plan.h"

#include <algorithm>

#include "lockstep/core/buffer_placement.h"
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

// A blob's bytes. oneDNN's blocked layouts pad the channels to a multiple of the block, but the convolutions
// whose channels do not fill a block work in NHWC (ops/conv_op.cc), so the CPU's activations take their
// plain size too.
size_t Bytes(const TensorShape& shape) {
  return static_cast<size_t>(NumElements(shape.dims)) * ElementSize(shape.dtype);
}

// Each device's operator scratch: on a CPU device its scratch pool (ops/dnnl_utils.h ScratchMemory), a
// buffer per slot as large as the largest request any op of the device makes in it; on a CUDA device the
// one cuDNN workspace its convolutions share, which their algorithm search grows to the largest limit.
std::map<std::string, size_t> ScratchPools(const NetDef& net,
                                           const std::map<std::string, TensorShape>& shapes) {
  std::map<std::string, std::vector<size_t>> slots;
  for (const auto& op : net.op()) {
    const Device device = DeviceOf(op);
    const OpSchema& schema = SchemaRegistry::Of(op);
    if (device.type != DeviceType::kCpu) {
      if (schema.gpu_options() & kCudnnWorkspace) {
        std::vector<size_t>& workspace = slots[device.ToString()];
        workspace.resize(1);
        workspace[0] = std::max(workspace[0], static_cast<size_t>(IntArg(op, kCudnnWorkspaceArg)));
      }
      continue;
    }
    std::vector<TensorShape> inputs;
    for (int k = 0; k < op.input_size(); ++k)
      inputs.push_back(schema.IsObjectInput(k) ? TensorShape{{}, DataType::kUndefined}
                                               : shapes.at(op.input(k)));
    const std::vector<size_t> scratch = schema.Scratch(op, inputs);
    std::vector<size_t>& largest = slots[device.ToString()];
    if (largest.size() < scratch.size()) largest.resize(scratch.size());
    for (size_t slot = 0; slot < scratch.size(); ++slot)
      largest[slot] = std::max(largest[slot], scratch[slot]);
  }
  std::map<std::string, size_t> pools;
  for (const auto& [device, largest] : slots)
    for (size_t bytes : largest) pools[device] += bytes;
  return pools;
}

}  // namespace

size_t MemoryPlan::Total() const {
  size_t total = 0;
  for (const auto& [device, use] : devices) total += use.Total();
  return total;
}

MemoryPlan PlanMemory(NetDef* net, const NetDef& init_net, const MemoryPlanOptions& options) {
  MemoryPlan plan;
  // Each blob's device: that of the op that first writes it.
  std::map<std::string, Device> device_of;
  std::set<std::string> made_by_init;
  for (const NetDef* n : {&init_net, static_cast<const NetDef*>(net)})
    for (const auto& op : n->op())
      for (const auto& name : op.output()) {
        device_of.try_emplace(name, DeviceOf(op));
        if (n == &init_net) made_by_init.insert(name);
      }
  std::map<std::string, TensorShape> shapes = options.given;
  std::map<std::string, size_t> bytes, scratch;
  if (InferShapes(init_net, *net, &shapes, &plan.unknown)) {
    for (const auto& [name, shape] : shapes)
      if (device_of.count(name)) bytes[name] = Bytes(shape);
    scratch = ScratchPools(*net, shapes);  // by the names the ops have before sharing renames them
  } else {
    plan.unknown = plan.unknown.empty() ? "a shape is unknown" : plan.unknown;
  }

  std::vector<Arena> arenas;
  std::set<std::string> placed;
  if (options.share && !options.scopes.empty()) {
    MemongerOptions memonger;
    memonger.namescopes = options.scopes;
    memonger.keep = options.keep;
    memonger.scratch = options.scratch;
    memonger.share_activations = true;
    if (!plan.unknown.empty()) {  // without sizes: shared names, most recently freed first
      *net = ShareBlobs(*net, memonger);
      return plan;
    }
    memonger.blob_bytes = bytes;
    std::vector<PlacedBlob> blobs;
    for (const auto& [device, size] : PlaceBlobs(net, memonger, &blobs)) arenas.push_back({device, size});
    std::vector<BufferPlacement> placements;
    for (const auto& blob : blobs) {
      placements.push_back({PlacedName(*net, blob.name), blob.buffer, blob.offset, blob.bytes});
      placed.insert(blob.name);
    }
    WriteBufferPlacement(net, arenas, placements);
  }
  if (!plan.unknown.empty()) return plan;

  for (const auto& [name, size] : bytes) {
    auto device = device_of.find(name);
    if (device == device_of.end()) continue;  // read, never written (an object's name)
    MemoryUse& use = plan.devices[device->second.ToString()];
    if (made_by_init.count(name))
      (options.parameters.count(name) ? use.parameters : use.state) += size;
    else if (options.gradients.count(name))
      use.gradients += size;
    else {
      use.unshared_activations += size;
      if (!placed.count(name)) use.activations += size;
    }
  }
  for (const auto& arena : arenas) plan.devices[arena.device.ToString()].activations += arena.bytes;
  for (const auto& [device, bytes] : scratch) plan.devices[device].scratch = bytes;
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
        "their gradients {} ({} without sharing), operator scratch {}{}\n",
        device, FormatBytes(use.Total()), FormatBytes(use.parameters), FormatBytes(use.state),
        FormatBytes(use.gradients), FormatBytes(use.activations), FormatBytes(use.unshared_activations),
        FormatBytes(use.scratch), use.evaluation ? ", evaluation " + FormatBytes(use.evaluation) : "");
  if (plan.devices.size() > 1) text += fmt::format("all devices {}\n", FormatBytes(plan.Total()));
  return text;
}

}  // namespace lockstep
