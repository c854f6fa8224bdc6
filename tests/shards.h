// Shards as threads of one test process: a job's file-store directory, a runner that starts one thread per
// shard, and shards joined to a job and connected over loopback, for the tests of the rendezvous, the Gloo
// collectives and what runs on them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/comm/gloo_communicator.h"

namespace lockstep::testing {

// An empty directory under the test temp dir, removed with the object.
class TempDirectory {
 public:
  TempDirectory();
  ~TempDirectory();
  TempDirectory(const TempDirectory&) = delete;
  TempDirectory& operator=(const TempDirectory&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Runs body(shard) on one thread per shard, all at once; throws one error listing every shard's exception.
void OnShards(int shards, const std::function<void(int)>& body);

// Gloo options for shards on 127.0.0.1, with timeouts that bound a test whose shard fails.
GlooOptions Loopback(const std::string& algorithm = "auto", std::vector<std::string> interfaces = {"lo"});

// OnShards, each shard joined to a fresh job on a file store.
void OnJoinedShards(int shards, const std::function<void(int, std::shared_ptr<Rendezvous>)>& body);

// OnJoinedShards, each with a connected communicator; no shard closes its connections before every shard has
// left its last collective.
void OnConnectedShards(int shards, const GlooOptions& options,
                       const std::function<void(int, GlooCommunicator&)>& body);

}  // namespace lockstep::testing
