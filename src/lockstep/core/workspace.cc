// Blob and net bookkeeping.
#include "lockstep/core/workspace.h"

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
  size_t bytes = 0;
  for (const auto& [name, blob] : blobs_) bytes += blob->capacity();
  return bytes;
}

std::vector<std::string> Workspace::BlobNames() const {
  std::vector<std::string> names;
  for (const auto& [name, blob] : blobs_) names.push_back(name);
  return names;
}

Net* Workspace::CreateNet(const NetDef& def, bool overwrite) {
  LOCKSTEP_ENFORCE(!def.name().empty(), "a net needs a name to be created in a workspace");
  auto& slot = nets_[def.name()];
  if (slot && !overwrite)
    throw InvalidInput(fmt::format("net '{}' already exists in the workspace", def.name()));
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

void Workspace::RunNetOnce(const NetDef& def) { CreateNetExecutor(def, this)->Run(); }

}  // namespace lockstep
