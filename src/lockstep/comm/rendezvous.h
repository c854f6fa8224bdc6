// Rendezvous: how the shards (processes) of a job find each other. They share a key-value store, a Redis
// server or a directory on a shared filesystem (Gloo's RedisStore / FileStore), and every key is prefixed by
// the run id, so two jobs with different run ids never meet. Joining claims the shard's place: a place that
// is already taken, by another process with the same shard id or by an earlier run with the same run id, is
// reported instead of joined.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace gloo::rendezvous {
class Store;
}

namespace lockstep {

// This machine's name, as records of who holds a place give it.
std::string HostName();
// True only when process `pid` ran on this machine (`host` is HostName()) and has exited.
bool ExitedHere(const std::string& host, long pid);

// The folder of file_store_path that holds a file store's keys, away from the checkpoints beside it.
inline constexpr char kRendezvousKeysFolder[] = "rendezvous";

struct RendezvousOptions {
  int num_shards = 1, shard_id = 0;
  std::string run_id;
  std::string run_id_flag = "--run_id";  // how users give it, for messages ("a store handler's prefix")
  std::string redis_host;                // Redis when set, else the directory file_store_path
  int redis_port = 6379;
  std::string file_store_path;
  std::chrono::milliseconds timeout{std::chrono::minutes(20)};  // how long to wait for the other shards
  std::chrono::seconds redis_reconnect{60};  // how long a Redis operation connects again before it fails
};

// Opens the store that `options` name and closes it again, throwing what Rendezvous would (InvalidInput for
// a missing run id or directory, IoError for a Redis that cannot be reached): for code that checks where the
// shards will meet before any of them waits there. The shard id and count are not read.
void CheckRendezvousStore(const RendezvousOptions& options);

class Rendezvous {
 public:
  // Opens the store, claims this shard's place and waits until every shard has joined. Throws IoError when
  // the store cannot be reached or a shard does not join in time, InvalidInput when the place is taken.
  explicit Rendezvous(const RendezvousOptions& options);
  ~Rendezvous();

  int shard() const { return options_.shard_id; }
  int num_shards() const { return options_.num_shards; }
  std::chrono::milliseconds timeout() const { return options_.timeout; }
  // "run 'x' on Redis 127.0.0.1:6379" or "run 'x' in file store /shared/dir"
  const std::string& description() const { return description_; }
  // The run's store, keys prefixed by the run id; what Gloo's contexts connect through.
  gloo::rendezvous::Store& store() { return *store_; }

  // Publishes this shard's value under `key` and returns every shard's, in shard order. Throws IoError naming
  // the shards that did not publish theirs within `timeout` (default: the rendezvous' timeout).
  std::vector<std::string> AllGather(const std::string& key, const std::string& value,
                                     std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  // A failure board: a shard that stops on an error says why and which shard it suspects (-1: none), so the
  // others can tell the shard that failed first from those that only stopped waiting for it.
  void ReportFailure(int suspect, const std::string& what);
  struct Failure {
    int suspect = -1;
    std::string what;
  };
  std::optional<Failure> FailureOf(int shard);
  // True when `shard` ran on this host and its process has exited (known once every shard has joined).
  bool Exited(int shard) const;

 private:
  bool Exists(const std::string& key);
  void Remove(const std::string& key);
  std::string Get(const std::string& key);
  void Set(const std::string& key, const std::string& value);
  // Waits for `key`/i of every shard i; returns the shards still missing when the deadline passed. With
  // `stoppable`, a stop request (core/stop_signals.h) ends the wait with Stopped. `arrived` is called once
  // for each shard whose key it finds.
  std::vector<int> WaitForAll(const std::string& key, std::chrono::milliseconds timeout,
                              bool stoppable = false, const std::function<void(int)>& arrived = nullptr);
  // Takes this shard's place, then waits for the others; a wait stopped or timed out gives the place back.
  void Join();
  void WaitForTheOthers();

  RendezvousOptions options_;
  std::string description_;
  std::unique_ptr<gloo::rendezvous::Store> backing_;
  std::function<bool(const std::string&)> exists_;  // on the backing store, with the full key
  std::function<void(const std::string&)> remove_;  // likewise
  std::unique_ptr<gloo::rendezvous::Store> store_;
  std::vector<std::string> holders_;  // who holds each place, once every shard has joined
  // Exists, Get and Set take it: a job's communicator channels use the rendezvous from their own threads, and
  // a Redis connection serves one request at a time.
  std::mutex store_mutex_;
};

}  // namespace lockstep
