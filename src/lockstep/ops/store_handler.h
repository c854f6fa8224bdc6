// The store handler of Caffe2's rendezvous: what FileStoreHandlerCreate and RedisStoreHandlerCreate put into
// the workspace, and what CreateCommonWorld(store_handler) connects the shards through. It names the store
// (a directory or a Redis server, keys prefixed by the run id) and, once connected, holds the shards'
// communicator, which every later CreateCommonWorld of the process shares: a shard joins a run once.
#pragma once

#include <memory>
#include <mutex>

#include "lockstep.pb.h"
#include "lockstep/comm/gloo_communicator.h"
#include "lockstep/comm/rendezvous.h"

namespace lockstep {

// The run id of a store handler made without Caffe2's `prefix`. Its keys stay in the store after the run, so
// a later run there needs a prefix of its own.
inline constexpr const char* kRunIdWithoutPrefix = "default";

class StoreHandler {
 public:
  // `where` names the store and the run id; its shard id and count are left to Connect.
  explicit StoreHandler(RendezvousOptions where) : where_(std::move(where)) {}

  // The communicator of shard `rank` of `size` shards: the first call joins the rendezvous and connects,
  // later calls return it. A later call with another size or rank is refused (InvalidInput naming `def`).
  std::shared_ptr<GlooCommunicator> Connect(const OperatorDef& def, int size, int rank,
                                            const GlooOptions& options);

 private:
  RendezvousOptions where_;
  std::mutex mutex_;  // one connection, whichever thread asks first
  std::shared_ptr<GlooCommunicator> communicator_;
};

}  // namespace lockstep
