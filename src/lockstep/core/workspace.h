// Workspace: the named blobs (tensors) a set of nets reads and writes, and the nets instantiated over them.
#pragma once

#include <any>
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
  std::vector<std::string> BlobNames() const;
  // Bytes allocated by all blobs: the step's peak tensor memory, since buffers are kept across runs.
  size_t AllocatedBytes() const;

  // Shared objects that operators find by name (a communicator, a data reader): set by the caller before the
  // nets that use them run, or by an operator whose output names one (CreateCommonWorld). An object is found
  // under the exact type it was set as: SetObject<Communicator>(name, gloo) for GetObject<Communicator>.
  template <typename T>
  void SetObject(const std::string& name, std::shared_ptr<T> object) {
    const void* address = object.get();
    objects_[name] = {std::move(object), address};
  }
  // nullptr when there is no object of that name and type.
  template <typename T>
  std::shared_ptr<T> FindObject(const std::string& name) const {
    auto it = objects_.find(name);
    const auto* object =
        it == objects_.end() ? nullptr : std::any_cast<std::shared_ptr<T>>(&it->second.value);
    return object ? *object : nullptr;
  }
  // The object's address whatever its type, nullptr when absent: which names share one object, asked by code
  // that does not know the type (the net orders collectives per communicator without depending on comm/).
  const void* ObjectAddress(const std::string& name) const {
    auto it = objects_.find(name);
    return it == objects_.end() ? nullptr : it->second.address;
  }
  // Throws InvalidInput when there is no object of that name and type.
  template <typename T>
  std::shared_ptr<T> GetObject(const std::string& name) const {
    std::shared_ptr<T> object = FindObject<T>(name);
    if (!object)
      throw InvalidInput(fmt::format("the workspace holds no object '{}' of the expected type", name));
    return object;
  }

  // Instantiates the net's operators once; RunNet then only runs them.
  Net* CreateNet(const NetDef& def, bool overwrite = false);
  Net* GetNet(const std::string& name);
  std::vector<std::string> NetNames() const;
  void RunNet(const std::string& name);
  void RunNetOnce(const NetDef& def);

 private:
  std::map<std::string, std::unique_ptr<Tensor>> blobs_;
  struct Object {
    std::any value;  // a std::shared_ptr<T>
    const void* address;
  };
  std::map<std::string, Object> objects_;
  std::map<std::string, std::unique_ptr<Net>> nets_;
};

}  // namespace lockstep
