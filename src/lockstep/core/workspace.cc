// Blob and net bookkeeping.
#include "lockstep/core/workspace.h"

#include <algorithm>
#include <vector>

#include "lockstep/core/buffer_placement.h"
#include "lockstep/core/net.h"

namespace lockstep {

Workspace::Workspace() = default;
Workspace::~Workspace() = default;

Tensor* Workspace::CreateBlob(const std::string& name) {
  auto& slot = blobs_[name];
  if (!slot) slot = std::make_unique<Tensor>();
  return slot.get();
}

Tensor* Workspace::GetBlob(const std::string& name) {
  auto it = blobs_.find(name);
  return it == blobs_.end() ? nullptr : it->second.get();
}

const Tensor& Workspace::Blob(const std::string& name) const {
  auto it = blobs_.find(name);
  if (it == blobs_.end()) throw InvalidInput(fmt::format("blob '{}' does not exist in the workspace", name));
  return *it->second;
}

bool Workspace::HasBlob(const std::string& name) const { return blobs_.count(name) > 0; }

size_t Workspace::AllocatedBytes() const {
  // Blobs may share a buffer (slices of a gradient bucket or of the memory plan's arena): the bytes are
  // those of the union of their address ranges.
  std::vector<std::pair<const uint8_t*, const uint8_t*>> ranges;
  for (const auto& [name, blob] : blobs_)
    if (blob->capacity() > 0) {
      const auto* begin = static_cast<const uint8_t*>(blob->raw_data());
      ranges.emplace_back(begin, begin + blob->capacity());
    }
  std::sort(ranges.begin(), ranges.end());
  size_t bytes = 0;
  const uint8_t* covered = nullptr;  // the end of the union so far
  for (const auto& [begin, end] : ranges) {
    if (covered && end <= covered) continue;
    bytes += static_cast<size_t>(end - (covered && begin < covered ? covered : begin));
    covered = end;
  }
  return bytes;
}

std::vector<std::string> Workspace::BlobNames() const {
  std::vector<std::string> names;
  for (const auto& [name, blob] : blobs_) names.push_back(name);
  return names;
}

std::vector<std::string> Workspace::NetNames() const {
  std::vector<std::string> names;
  for (const auto& [name, net] : nets_) names.push_back(name);
  return names;
}

Net* Workspace::CreateNet(const NetDef& def, bool overwrite) {
  LOCKSTEP_ENFORCE(!def.name().empty(), "a net needs a name to be created in a workspace");
  auto& slot = nets_[def.name()];
  if (slot && !overwrite)
    throw InvalidInput(fmt::format("net '{}' already exists in the workspace", def.name()));
  ApplyBufferPlacement(def, this);
  slot = CreateNetExecutor(def, this);
  return slot.get();
}

Net* Workspace::GetNet(const std::string& name) {
  auto it = nets_.find(name);
  return it == nets_.end() ? nullptr : it->second.get();
}

void Workspace::RunNet(const std::string& name) {
  Net* net = GetNet(name);
  if (!net) throw InvalidInput(fmt::format("net '{}' does not exist in the workspace", name));
  net->Run();
}

void Workspace::RunNetOnce(const NetDef& def) {
  ApplyBufferPlacement(def, this);
  CreateNetExecutor(def, this)->Run();
}

}  // namespace lockstep
