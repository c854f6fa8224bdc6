// Shards as threads of one test process: a job's file-store directory and a runner that starts one thread per
// shard, for the tests of the rendezvous and the Gloo collectives.
#pragma once

#include <functional>
#include <string>

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

}  // namespace lockstep::testing
