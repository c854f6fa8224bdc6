// Workspace: the named blobs (tensors) a set of nets reads and writes, and the nets instantiated over them.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lockstep.pb.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

class Net;

class Workspace {
 public:
  Workspace();
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  // Returns the blob, creating an empty one if needed. Pointers stay valid for the workspace's lifetime.
  Tensor* CreateBlob(const std::string& name);
  Tensor* GetBlob(const std::string& name);           // nullptr when absent
  const Tensor& Blob(const std::string& name) const;  // throws InvalidInput when absent
  bool HasBlob(const std::string& name) const;

  // Instantiates the net's operators once; RunNet then only runs them.
  Net* CreateNet(const NetDef& def, bool overwrite = false);
  Net* GetNet(const std::string& name);
  void RunNet(const std::string& name);
  void RunNetOnce(const NetDef& def);

 private:
  std::map<std::string, std::unique_ptr<Tensor>> blobs_;
  std::map<std::string, std::unique_ptr<Net>> nets_;
};

}  // namespace lockstep
