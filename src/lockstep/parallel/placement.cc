// Model placement: blob locations, automatic copies, stages.
#include "lockstep/parallel/placement.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <set>

#include "lockstep/ops/op_defs.h"

namespace lockstep {
namespace {

// Follows where every blob lives while walking the net in order and calls `foreign` for each input that an
// op must not read from where it is; `foreign` returns the blob the op reads instead.
class BlobLocations {
 public:
  explicit BlobLocations(const NetDef& init_net) {
    for (const auto& op : init_net.op()) Record(op);
  }

  using Foreign =
      std::function<std::string(const OperatorDef& op, const std::string& blob, const Device& at)>;

  // Visits one op: rewrites its foreign inputs through `foreign`, then records its outputs' location.
  void Visit(OperatorDef* op, const Foreign& foreign) {
    const Device device = DeviceOf(*op);
    const bool reads_anywhere = SchemaRegistry::Of(*op).reads_any_device();
    for (int i = 0; i < op->input_size(); ++i) {
      const std::string blob = op->input(i);
      if (IsObjectInput(*op, i)) continue;  // a workspace object (a communicator) is in no device's memory
      auto found = location_.emplace(blob, device).first;  // unwritten blobs live with their first reader
      if (reads_anywhere || found->second == device) continue;
      if (std::find(op->output().begin(), op->output().end(), blob) != op->output().end())
        throw InvalidInput(fmt::format(
            "{} runs on {} and updates '{}' in place, but '{}' lives on {}; build the op under the device "
            "scope of {}",
            DescribeOperator(*op), device.ToString(), blob, blob, found->second.ToString(),
            found->second.ToString()));
      op->set_input(i, foreign(*op, blob, found->second));
    }
    Record(*op);
  }

  // The copy of `blob` on `device` made since it was last written, or "".
  std::string CopyOf(const std::string& blob, const Device& device) const {
    auto it = copies_.find({blob, device.ToString()});
    return it == copies_.end() ? "" : it->second;
  }
  void AddCopy(const std::string& blob, const Device& device, const std::string& copy) {
    copies_[{blob, device.ToString()}] = copy;
    location_[copy] = device;
  }

 private:
  // The op's outputs now live on its device (a collective leaves every blob where it was); copies made of
  // their previous values are stale.
  void Record(const OperatorDef& op) {
    for (int i = 0; i < op.output_size(); ++i) {
      if (IsObjectOutput(op, i)) continue;
      const std::string& blob = op.output(i);
      if (!IsCollective(op) || !location_.count(blob)) location_[blob] = DeviceOf(op);
      for (auto it = copies_.begin(); it != copies_.end();)
        it = it->first.first == blob ? copies_.erase(it) : std::next(it);
    }
  }

  std::map<std::string, Device> location_;
  std::map<std::pair<std::string, std::string>, std::string> copies_;
};

// Estimated work of one forward op, as its schema states it, from the shapes of a run of InferNetShapes.
double OpCost(const OperatorDef& op, const std::map<std::string, TensorShape>& shapes) {
  std::vector<TensorShape> inputs, outputs;
  for (const auto& blob : op.input()) inputs.push_back(shapes.at(blob));
  for (const auto& blob : op.output()) outputs.push_back(shapes.at(blob));
  return SchemaRegistry::Of(op).Cost(op, inputs, outputs);
}

}  // namespace

int InsertCopies(NetDef* net, const NetDef& init_net) {
  BlobLocations locations(init_net);
  NetDef placed = *net;
  placed.clear_op();
  int inserted = 0;
  for (OperatorDef op : net->op()) {
    const Device device = DeviceOf(op);
    locations.Visit(&op, [&](const OperatorDef& reader, const std::string& blob, const Device&) {
      std::string copy = locations.CopyOf(blob, device);
      if (!copy.empty()) return copy;
      copy = fmt::format("{}@{}", blob, device.ToString());
      OperatorDef* copy_op = placed.add_op();
      *copy_op = CopyDef(blob, copy);
      SetDevice(copy_op, device);
      if (reader.is_gradient_op()) copy_op->set_is_gradient_op(true);
      locations.AddCopy(blob, device, copy);
      ++inserted;
      return copy;
    });
    *placed.add_op() = op;
  }
  *net = placed;
  return inserted;
}

void CheckPlacement(const NetDef& net, const NetDef& init_net) {
  BlobLocations locations(init_net);
  for (OperatorDef op : net.op())
    locations.Visit(
        &op, [](const OperatorDef& reader, const std::string& blob, const Device& at) -> std::string {
          throw InvalidInput(
              fmt::format("{} runs on {} but reads '{}', which lives on {}; copy it first (InsertCopies adds "
                          "the copies a "
                          "placed net needs)",
                          DescribeOperator(reader), DeviceOf(reader).ToString(), blob, at.ToString()));
        });
}

void PlaceStages(ModelHelper& model, const std::vector<int>& stage_starts,
                 const std::vector<Device>& devices) {
  NetDef& net = model.net();
  LOCKSTEP_ENFORCE(stage_starts.size() == devices.size() && !devices.empty(),
                   "{} stage starts for {} devices", stage_starts.size(), devices.size());
  for (size_t s = 0; s < stage_starts.size(); ++s)
    LOCKSTEP_ENFORCE(stage_starts[s] >= 0 && stage_starts[s] < net.op_size() &&
                         (s == 0 || stage_starts[s] > stage_starts[s - 1]),
                     "stage starts must be increasing op indices below {}", net.op_size());
  std::set<std::string> placed_params;
  size_t stage = 0;
  for (int i = stage_starts[0]; i < net.op_size(); ++i) {
    while (stage + 1 < stage_starts.size() && i >= stage_starts[stage + 1]) ++stage;
    OperatorDef* op = net.mutable_op(i);
    SetDevice(op, devices[stage]);
    for (const auto& blob : op->input()) {
      bool is_param = std::any_of(model.params().begin(), model.params().end(),
                                  [&](const ParamInfo& p) { return p.name == blob; });
      if (is_param && placed_params.insert(blob).second) model.SetParamDevice(blob, devices[stage]);
    }
  }
}

void PlaceLayers(ModelHelper& model, const std::vector<std::pair<std::string, Device>>& from_layer,
                 const std::vector<Device>& available) {
  std::vector<std::pair<int, Device>> starts;
  for (const auto& [layer, device] : from_layer) {
    if (std::find(available.begin(), available.end(), device) == available.end()) {
      std::string names;
      for (const auto& d : available) names += (names.empty() ? "" : ", ") + d.ToString();
      throw InvalidInput(fmt::format("layer '{}' is placed on {}, which does not exist; the devices are {}",
                                     layer, device.ToString(), names));
    }
    const std::string output = model.Scoped(layer);
    int writer = -1;
    for (int i = 0; i < model.net().op_size() && writer < 0; ++i)
      for (const auto& blob : model.net().op(i).output())
        if (blob == output) writer = i;
    if (writer < 0)
      throw InvalidInput(fmt::format(
          "model '{}' has no layer '{}' to place on {}; name a layer by its output blob (e.g. 'conv1')",
          model.name(), output, device.ToString()));
    starts.push_back({writer, device});
  }
  std::sort(starts.begin(), starts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<int> stage_starts;
  std::vector<Device> devices;
  for (const auto& [op, device] : starts) {
    if (!stage_starts.empty() && stage_starts.back() == op)
      throw InvalidInput(fmt::format("two placements name the layer written by op {}", op));
    stage_starts.push_back(op);
    devices.push_back(device);
  }
  if (!stage_starts.empty()) PlaceStages(model, stage_starts, devices);
}

std::vector<int> BalancedStageStarts(const ModelHelper& model, int first_op, int stages,
                                     std::map<std::string, TensorShape> shapes) {
  const NetDef& net = model.net();
  const int n = net.op_size() - first_op;
  if (stages < 1 || stages > n)
    throw InvalidInput(fmt::format(
        "cannot split the {} layers (operators) of model '{}' into {} stages; use between 1 and {} stages", n,
        net.name(), stages, n));
  for (const auto& param : model.params()) shapes[param.name] = {param.shape, DataType::kFloat};
  NetDef forward;
  for (int i = first_op; i < net.op_size(); ++i) *forward.add_op() = net.op(i);
  auto inferred = InferNetShapes(forward, shapes);
  inferred.insert(shapes.begin(), shapes.end());

  // Linear partition: best[s][i] is the smallest possible cost of the costliest stage when ops [0, i) form
  // s stages; cut[s][i] is where the last of them starts.
  std::vector<double> prefix(n + 1, 0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + OpCost(forward.op(i), inferred);
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0;
  for (int s = 1; s <= stages; ++s)
    for (int i = s; i <= n; ++i)
      for (int j = s - 1; j < i; ++j) {
        double cost = std::max(best[s - 1][j], prefix[i] - prefix[j]);
        if (cost < best[s][i]) {
          best[s][i] = cost;
          cut[s][i] = j;
        }
      }
  std::vector<int> starts(stages);
  for (int s = stages, i = n; s >= 1; --s) {
    starts[s - 1] = first_op + cut[s][i];
    i = cut[s][i];
  }
  return starts;
}

}  // namespace lockstep
