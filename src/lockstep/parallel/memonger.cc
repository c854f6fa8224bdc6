// Blob sharing by liveness. One pass over the ops records, for every blob, the op that first writes it and
// the last op that reads or writes it; the renamable blobs are then given shared names greedily, in the order
// they are first written, each taking a shared name whose previous holders are all dead by then.
#include "lockstep/parallel/memonger.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "lockstep/core/net_def.h"
#include "lockstep/core/schema.h"

namespace lockstep {

namespace {

struct Lifetime {
  int first_write = -1;  // -1 when the blob is read before any op writes it
  int last_use = -1;
  bool read = false;  // some op reads it (a blob only written is a result the caller fetches)
  bool written_by_gradient_op = false;
  bool collective = false;  // read or written by a collective op: it belongs to several devices' traffic
  bool object = false;      // names a workspace object (a communicator), not a tensor
  Device device;
};

// A shared name and what it holds so far.
struct Slot {
  std::string name;
  int last_use;
  size_t bytes;  // the largest holder's size (0 without sizes)
};

// Blob name -> its lifetime. Hashed: the nets of many devices name tens of thousands of blobs whose names
// share long prefixes, which an ordered map compares again and again.
using LifetimeMap = std::unordered_map<std::string, Lifetime>;

// The name scopes whose blobs may share, each name's found in a hash lookup per distinct scope length
// ("cpu_3/" and "cpu_12/" make two) however many devices there are.
class NameScopes {
 public:
  explicit NameScopes(const std::vector<std::string>& scopes) : every_(scopes.empty()) {
    for (const auto& scope : scopes) {
      scopes_.insert(scope);
      lengths_.insert(scope.size());
    }
  }
  // The scope `name` is under, or nullptr; "" for every name when no scope was given.
  const std::string* Of(const std::string& name) const {
    static const std::string kEvery;
    if (every_) return &kEvery;
    for (size_t length : lengths_) {
      auto it = scopes_.find(name.substr(0, length));
      if (it != scopes_.end()) return &*it;
    }
    return nullptr;
  }

 private:
  bool every_;
  std::unordered_set<std::string> scopes_;
  std::set<size_t> lengths_;
};

// Lifetimes of every blob the net touches, and the blobs in the order they first appear.
LifetimeMap Lifetimes(const NetDef& net, std::vector<std::string>* order) {
  LifetimeMap lifetimes;
  for (int i = 0; i < net.op_size(); ++i) {
    const OperatorDef& op = net.op(i);
    const bool collective = IsCollective(op);
    auto use = [&](const std::string& name, bool write, bool object) {
      auto [it, fresh] = lifetimes.try_emplace(name);
      Lifetime& life = it->second;
      if (fresh) {
        order->push_back(name);
        if (write) {
          life.first_write = i;
          life.written_by_gradient_op = op.is_gradient_op();
          life.device = DeviceOf(op);
        }
      }
      life.last_use = i;
      life.read |= !write;
      life.collective |= collective;
      life.object |= object;
    };
    // Inputs first: an op that reads and writes a blob no earlier op wrote (Iter) reads its state.
    for (int k = 0; k < op.input_size(); ++k) use(op.input(k), false, IsObjectInput(op, k));
    for (int k = 0; k < op.output_size(); ++k) use(op.output(k), true, IsObjectOutput(op, k));
  }
  return lifetimes;
}

// The free slot of a device's slots a blob of `bytes` goes to, or nullptr. With sizes: the smallest slot that
// holds it, else the largest (which grows the least), so big slots stay for big blobs. Without sizes: the
// most recently freed slot, because the backward pass mirrors the forward one and the gradient just freed
// usually has the size of the one being created. On a ResNet-50 step (bench/memonger_resnet50.cc) both give
// the same 42% for gradients; once activations share too, freed blobs vary in size and best fit saves 55%
// against 51%.
Slot* ChooseSlot(std::vector<Slot>& slots, int first_write, size_t bytes, bool have_sizes) {
  Slot* best = nullptr;
  auto better = [&](const Slot& slot) {
    if (!best) return true;
    if (!have_sizes) return slot.last_use > best->last_use;
    bool fits = slot.bytes >= bytes, best_fits = best->bytes >= bytes;
    if (fits != best_fits) return fits;
    if (slot.bytes != best->bytes) return fits ? slot.bytes < best->bytes : slot.bytes > best->bytes;
    return slot.last_use > best->last_use;
  };
  for (Slot& slot : slots)
    if (slot.last_use < first_write && better(slot)) best = &slot;
  return best;
}

// The rule of ShareBlobs' comment: whether a blob may give up its own buffer.
std::function<bool(const std::string&, const Lifetime&)> Renamable(const NetDef& net,
                                                                   const MemongerOptions& options,
                                                                   const NameScopes& scopes) {
  std::set<std::string> pinned = options.keep;
  pinned.insert(net.external_input().begin(), net.external_input().end());
  pinned.insert(net.external_output().begin(), net.external_output().end());
  return [pinned, &options, &scopes](const std::string& name, const Lifetime& life) {
    return scopes.Of(name) && !pinned.count(name) && life.first_write >= 0 &&
           (life.read || options.scratch.count(name)) && !life.collective && !life.object &&
           (options.share_activations || life.written_by_gradient_op);
  };
}

size_t BytesOf(const MemongerOptions& options, const std::string& name) {
  auto it = options.blob_bytes.find(name);
  if (it == options.blob_bytes.end())
    throw InvalidInput(
        fmt::format("ShareBlobs: blob_bytes has no size for '{}'; give the size of every blob the "
                    "net writes, or none",
                    name));
  return it->second;
}

}  // namespace

NetDef ShareBlobs(const NetDef& net, const MemongerOptions& options) {
  std::vector<std::string> order;
  const LifetimeMap lifetimes = Lifetimes(net, &order);
  const bool have_sizes = !options.blob_bytes.empty();
  const NameScopes scopes(options.namescopes);
  const auto renamable = Renamable(net, options, scopes);

  // `order` lists blobs by first appearance, so renamable ones come by first write.
  std::map<std::pair<DeviceType, int>, std::vector<Slot>> slots_of;  // each device's
  std::unordered_map<std::string, std::string> renamed;
  std::map<std::string, int> next_index;  // each scope's
  auto fresh_name = [&](const std::string& scope) {
    std::string name;
    do name = fmt::format("{}{}{}", scope, kSharedBlobMarker, next_index[scope]++);
    while (lifetimes.count(name));
    return name;
  };
  for (const auto& name : order) {
    const Lifetime& life = lifetimes.at(name);
    if (!renamable(name, life)) continue;
    const size_t size = have_sizes ? BytesOf(options, name) : 0;
    std::vector<Slot>& slots = slots_of[{life.device.type, life.device.id}];
    Slot* slot = ChooseSlot(slots, life.first_write, size, have_sizes);
    if (!slot) {
      slots.push_back({fresh_name(*scopes.Of(name)), -1, 0});
      slot = &slots.back();
    }
    slot->last_use = life.last_use;
    slot->bytes = std::max(slot->bytes, size);
    renamed[name] = slot->name;
  }

  NetDef result = net;
  auto shared = [&](const std::string& name) { return renamed.count(name) > 0; };
  for (auto& op : *result.mutable_op()) {
    if (std::none_of(op.input().begin(), op.input().end(), shared) &&
        std::none_of(op.output().begin(), op.output().end(), shared))
      continue;
    // An op's errors name its blobs as the model built them (core/net_def.h), not the shared buffers.
    if (op.debug_info().empty()) op.set_debug_info(DescribeOperator(op));
    for (auto* names : {op.mutable_input(), op.mutable_output()})
      for (auto& name : *names)
        if (shared(name)) name = renamed.at(name);
  }
  return result;
}

std::vector<std::pair<Device, size_t>> PlaceBlobs(NetDef* net, const MemongerOptions& options,
                                                  std::vector<PlacedBlob>* placed) {
  std::vector<std::string> order;
  const LifetimeMap lifetimes = Lifetimes(*net, &order);
  const NameScopes scopes(options.namescopes);
  const auto renamable = Renamable(*net, options, scopes);
  auto round_up = [](size_t bytes) { return (bytes + 63) / 64 * 64; };
  // The blobs to place with their bytes: largest first, then by first write.
  std::vector<std::pair<const std::string*, size_t>> blobs;
  for (const auto& name : order)
    if (renamable(name, lifetimes.at(name)))
      if (const size_t bytes = round_up(BytesOf(options, name)); bytes > 0) blobs.push_back({&name, bytes});
  std::stable_sort(blobs.begin(), blobs.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  auto live_together = [&](const Lifetime& a, const Lifetime& b) {
    return !(a.last_use < b.first_write || b.last_use < a.first_write);
  };

  struct Spot {
    const std::string* name;
    const Lifetime* life;
    int buffer;
    size_t begin, end;
  };
  std::vector<std::pair<Device, size_t>> buffers;
  std::vector<Spot> spots;  // placed so far, in order
  std::vector<std::vector<size_t>>
      in_buffer;  // each buffer's spots, in order: a device's blobs meet only theirs
  for (const auto& [name, bytes] : blobs) {
    const Lifetime& life = lifetimes.at(*name);
    int buffer = 0;
    while (buffer < static_cast<int>(buffers.size()) && !(buffers[buffer].first == life.device)) ++buffer;
    if (buffer == static_cast<int>(buffers.size())) {
      buffers.push_back({life.device, 0});
      in_buffer.emplace_back();
    }
    std::vector<const Spot*> taken;
    for (size_t index : in_buffer[buffer])
      if (live_together(life, *spots[index].life)) taken.push_back(&spots[index]);
    std::sort(taken.begin(), taken.end(), [](const Spot* a, const Spot* b) { return a->begin < b->begin; });
    size_t offset = 0;
    for (const Spot* spot : taken) {
      if (offset + bytes <= spot->begin) break;
      offset = std::max(offset, spot->end);
    }
    in_buffer[buffer].push_back(spots.size());
    spots.push_back({name, &life, buffer, offset, offset + bytes});
    buffers[buffer].second = std::max(buffers[buffer].second, offset + bytes);
  }

  // A blob that reuses an earlier blob's bytes waits for that blob's uses: each writer op's waits, once
  // each, in the order found (names compared by address: each lives once, in `order`).
  std::vector<std::vector<const std::string*>> waits(net->op_size());
  for (const Spot& later : spots) {
    std::vector<const std::string*>& writer = waits[later.life->first_write];
    for (size_t index : in_buffer[later.buffer]) {
      const Spot& earlier = spots[index];
      const bool overlap = earlier.begin < later.end && later.begin < earlier.end;
      if (overlap && earlier.life->last_use < later.life->first_write &&
          std::find(writer.begin(), writer.end(), earlier.name) == writer.end())
        writer.push_back(earlier.name);
    }
    placed->push_back({*later.name, later.buffer, later.begin, later.end - later.begin});
  }
  for (int i = 0; i < net->op_size(); ++i) {
    OperatorDef* op = net->mutable_op(i);
    const std::vector<std::string> had(op->control_input().begin(), op->control_input().end());  // rarely any
    for (const std::string* name : waits[i])
      if (std::find(had.begin(), had.end(), *name) == had.end()) op->add_control_input(*name);
  }
  // Placed blobs get names of this net's own: another net of the workspace (an evaluation net built with the
  // same layer names) must not write into this net's buffer.
  std::unordered_map<std::string, std::string> renamed;
  for (const auto& blob : *placed) renamed[blob.name] = PlacedName(*net, blob.name);
  for (auto& op : *net->mutable_op()) {
    for (auto* names : {op.mutable_input(), op.mutable_output(), op.mutable_control_input()})
      for (auto& name : *names) {
        auto it = renamed.find(name);
        if (it != renamed.end()) name = it->second;
      }
  }
  return buffers;
}

std::string PlacedName(const NetDef& net, const std::string& blob) {
  return fmt::format("{}__{}", blob, net.name());
}

}  // namespace lockstep
