// A Redis key-value store that outlives a restart of its server (or a network blip): an operation whose
// connection fails, or whose server does not answer within seconds (stopped, cut off), connects again and is
// retried for up to a minute, saying so once; then it fails, rather than wait for ever. The shards'
// rendezvous, the Gloo contexts that connect through it and `lockstep launch`'s agents use it, so a job whose
// Redis restarts runs on and ends as it would have.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lockstep/core/enforce.h"

namespace gloo::rendezvous {
class RedisStore;
}

namespace lockstep {

// The server was not reached for the whole of a RedisStore's reconnect time.
class StoreUnavailable : public IoError {
 public:
  using IoError::IoError;
};

class RedisStore : public gloo::rendezvous::Store {
 public:
  // Connects; throws IoError naming `host`:`port` when it cannot. `who` starts the line said on a reconnect
  // ("lockstep launch", "shard 1").
  // An operation goes on connecting again for `reconnect_for` before it fails: a restart of the server takes
  // seconds; the shards need the store only to meet, to end and to report failures, so training runs on.
  RedisStore(std::string host, int port, std::string who,
             std::chrono::seconds reconnect_for = std::chrono::seconds(60));
  ~RedisStore() override;

  // Creates `key` (Gloo's set: a key that exists is an error).
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
  // True when every key exists.
  bool check(const std::vector<std::string>& keys);
  // Creates `key` unless it exists; false when it did.
  bool Create(const std::string& key, const std::vector<char>& data);
  // Removes `key` if it exists.
  void Remove(const std::string& key);

 private:
  // Runs operation(connection, retry); when the connection fails, connects again and retries (retry true).
  template <typename Operation>
  auto Reconnecting(const std::string& what, Operation operation);

  std::string host_;
  int port_;
  std::string who_;
  std::chrono::seconds reconnect_for_;
  std::mutex mutex_;  // a connection serves one request at a time
  std::unique_ptr<gloo::rendezvous::RedisStore> redis_;
};

}  // namespace lockstep
