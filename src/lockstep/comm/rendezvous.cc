// Keys under the run id: "shard/<i>" (who holds place i), "<key>/<i>" for AllGather, "failed/<i>" for the
// failure board, and Gloo's own connection keys.
#include "lockstep/comm/rendezvous.h"

#include <gloo/common/error.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <sstream>
#include <thread>

#include "lockstep/comm/gloo_message.h"
#include "lockstep/comm/redis_store.h"
#include "lockstep/core/enforce.h"
#include "lockstep/core/output_directory.h"
#include "lockstep/core/stop_signals.h"

namespace lockstep {
namespace {

// Gloo's FileStore tests for keys only internally and never removes one; expose both.
class CheckableFileStore : public gloo::rendezvous::FileStore {
 public:
  using FileStore::FileStore;
  bool Exists(const std::string& key) { return check({key}); }
  void Remove(const std::string& key) { std::filesystem::remove(objectPath(key)); }
};

// Who holds a place: "host pid unix-time".
struct Holder {
  std::string host;
  long pid = 0;
  long since = 0;
  int num_shards = 0;  // the count it was started with, which every shard must share

  static Holder Me(int num_shards) {
    return {HostName(), static_cast<long>(getpid()), static_cast<long>(std::time(nullptr)), num_shards};
  }
  static Holder Parse(const std::string& text) {
    Holder h;
    std::istringstream(text) >> h.host >> h.pid >> h.since >> h.num_shards;
    return h;
  }
  std::string ToString() const { return fmt::format("{} {} {} {}", host, pid, since, num_shards); }
  // True only when the holder ran on this host and has exited.
  bool DeadHere() const { return ExitedHere(host, pid); }
  std::string Describe() const {
    char when[32] = "?";
    std::time_t t = since;
    std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", std::localtime(&t));
    return fmt::format("pid {} on host {} since {}", pid, host, when);
  }
};

std::string ShardList(const std::vector<int>& shards) {
  std::string out;
  for (size_t i = 0; i < shards.size(); ++i) out += (i ? ", " : "") + std::to_string(shards[i]);
  return out;
}

}  // namespace

std::string HostName() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

bool ExitedHere(const std::string& host, long pid) {
  return host == HostName() && pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

namespace {

// The store `options` name, with how messages describe it and how to test for a key there.
struct BackingStore {
  std::unique_ptr<gloo::rendezvous::Store> store;
  std::string description;
  std::function<bool(const std::string&)> exists;  // with the full key
  std::function<void(const std::string&)> remove;  // likewise
};

BackingStore OpenBackingStore(const RendezvousOptions& options) {
  if (options.run_id.empty())
    throw InvalidInput(
        "a run id is required: pass the same unique --run_id (e.g. $(date +%s)) to every shard");
  // The run's keys are "<run id>/...": a '/' would let one run's keys be another's ("a/b" and "a").
  if (options.run_id.find_first_of("/ \t\n") != std::string::npos)
    throw InvalidInput(fmt::format("--run_id '{}': use no '/' and no spaces", options.run_id));
  BackingStore backing;
  if (!options.redis_host.empty()) {
    backing.description =
        fmt::format("run '{}' on Redis {}:{}", options.run_id, options.redis_host, options.redis_port);
    try {
      auto redis = std::make_unique<RedisStore>(options.redis_host, options.redis_port, "lockstep",
                                                options.redis_reconnect);
      backing.exists = [store = redis.get()](const std::string& key) { return store->check({key}); };
      backing.remove = [store = redis.get()](const std::string& key) { store->Remove(key); };
      backing.store = std::move(redis);
    } catch (const IoError& e) {
      throw IoError(fmt::format("{}: start redis-server there or fix --redis_host / --redis_port", e.what()));
    }
    return backing;
  }
  namespace fs = std::filesystem;
  const std::string& path = options.file_store_path;
  if (path.empty()) throw InvalidInput("pass --redis_host or --file_store_path for the shards to meet");
  PrepareOutputDirectory(path, "--file_store_path", IfMissing::kRefuse,
                         "the shards meet in a directory they can all write (e.g. on NFS); create it or pass "
                         "--redis_host");
  backing.description = fmt::format("run '{}' in file store {}", options.run_id, fs::absolute(path).string());
  // Its keys (a file each) go to a folder of their own: the directory also holds the checkpoints.
  const fs::path keys = fs::path(path) / kRendezvousKeysFolder;
  std::error_code error;
  fs::create_directories(keys, error);
  if (error)
    throw IoError(
        fmt::format("--file_store_path {}: cannot create {} ({})", path, keys.string(), error.message()));
  auto files = std::make_unique<CheckableFileStore>(keys.string());
  backing.exists = [store = files.get()](const std::string& key) { return store->Exists(key); };
  backing.remove = [store = files.get()](const std::string& key) { store->Remove(key); };
  backing.store = std::move(files);
  return backing;
}

}  // namespace

void CheckRendezvousStore(const RendezvousOptions& options) { OpenBackingStore(options); }

Rendezvous::Rendezvous(const RendezvousOptions& options) : options_(options) {
  if (options.num_shards < 1 || options.shard_id < 0 || options.shard_id >= options.num_shards)
    throw InvalidInput(
        fmt::format("--shard_id {} must be in [0, --num_shards {})", options.shard_id, options.num_shards));
  BackingStore backing = OpenBackingStore(options);
  description_ = std::move(backing.description);
  exists_ = std::move(backing.exists);
  remove_ = std::move(backing.remove);
  backing_ = std::move(backing.store);
  store_ = std::make_unique<gloo::rendezvous::PrefixStore>(options.run_id, *backing_);
  Join();
}

Rendezvous::~Rendezvous() = default;

namespace {

// Throws the store's error `e`, said of `what`: a StoreUnavailable when the store was not reached (the caller
// may go on without it), else an IoError.
[[noreturn]] void ThrowStoreError(const std::string& what, const std::exception& e) {
  const std::string message = fmt::format("{}: {}", what, GlooMessage(e.what()));
  if (dynamic_cast<const StoreUnavailable*>(&e)) throw StoreUnavailable(message);
  throw IoError(message);
}

}  // namespace

bool Rendezvous::Exists(const std::string& key) {
  std::lock_guard<std::mutex> lock(store_mutex_);
  try {
    return exists_(options_.run_id + "/" + key);  // PrefixStore's key
  } catch (const std::exception& e) {
    ThrowStoreError(fmt::format("{}: looking up '{}' failed", description_, key), e);
  }
}

void Rendezvous::Remove(const std::string& key) {
  std::lock_guard<std::mutex> lock(store_mutex_);
  remove_(options_.run_id + "/" + key);  // PrefixStore's key
}

std::string Rendezvous::Get(const std::string& key) {
  std::lock_guard<std::mutex> lock(store_mutex_);
  try {
    std::vector<char> value = store_->get(key);
    return std::string(value.begin(), value.end());
  } catch (const std::exception& e) {
    ThrowStoreError(fmt::format("{}: reading '{}' failed", description_, key), e);
  }
}

void Rendezvous::Set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(store_mutex_);
  try {
    store_->set(key, std::vector<char>(value.begin(), value.end()));
  } catch (const std::exception& e) {
    ThrowStoreError(fmt::format("{}: writing '{}' failed", description_, key), e);
  }
}

std::vector<int> Rendezvous::WaitForAll(const std::string& key, std::chrono::milliseconds timeout,
                                        bool stoppable, const std::function<void(int)>& arrived) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<int> missing;
  for (int i = 0; i < options_.num_shards; ++i) missing.push_back(i);
  while (true) {
    std::vector<int> still;
    for (int i : missing) {
      if (Exists(fmt::format("{}/{}", key, i))) {
        if (arrived) arrived(i);
        continue;
      }
      // Shards that will never publish: those that stopped on an error, and those on this host that exited.
      if (auto failure = FailureOf(i))
        throw IoError(
            fmt::format("shard {}: shard {} stopped on an error: {}", options_.shard_id, i, failure->what));
      if (Exited(i))
        throw IoError(fmt::format("shard {}: shard {} ({}) exited before publishing its {}",
                                  options_.shard_id, i, Holder::Parse(holders_[i]).Describe(), key));
      still.push_back(i);
    }
    missing = still;
    if (missing.empty() || std::chrono::steady_clock::now() >= deadline) return missing;
    if (const int signal = stoppable ? StopRequested() : 0)
      throw Stopped(signal,
                    fmt::format("stopped by {} while shard {} waited for shard {} to join {}, before "
                                "training",
                                StopSignalName(signal), options_.shard_id, ShardList(missing), description_));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void Rendezvous::Join() {
  const int me = options_.shard_id;
  const std::string place = fmt::format("shard/{}", me);
  auto taken = [&]() {
    Holder holder = Holder::Parse(Get(place));
    if (holder.DeadHere())
      return InvalidInput(
          fmt::format("shard {} of {} was held by {}, which has exited: keys of an earlier run "
                      "with this run id; pass a fresh {}",
                      me, description_, holder.Describe(), options_.run_id_flag));
    return InvalidInput(
        fmt::format("shard {} of {} is already held by {}: another process runs with --shard_id "
                    "{}, or an earlier run used this run id; pass a fresh {} or a free "
                    "--shard_id",
                    me, description_, holder.Describe(), me, options_.run_id_flag));
  };
  if (Exists(place)) throw taken();
  try {
    Set(place, Holder::Me(options_.num_shards).ToString());
  } catch (const IoError&) {
    if (Exists(place)) throw taken();  // another process claimed it between our check and our write
    throw;
  }
  try {
    WaitForTheOthers();
  } catch (const InvalidInput&) {
    throw;  // shards started otherwise: the others learn it from this place (its count)
  } catch (const Error&) {
    // Stopped, or the others did not come: nobody trained with this run id yet, so the place goes back and
    // the same command can be run again.
    try {
      Remove(place);
    } catch (const std::exception&) {
      // Best effort: the store may be what failed.
    }
    throw;
  }
}

void Rendezvous::WaitForTheOthers() {
  const int me = options_.shard_id;
  // Shards may start minutes apart: a Ctrl-C meanwhile ends the wait. Later waits are for shards that joined.
  // Shards started with different counts would each wait for a different set: the larger count forever.
  auto same_count = [&](int i) {
    const Holder other = Holder::Parse(Get(fmt::format("shard/{}", i)));
    // (A holder that has exited is reported after the wait; records of older versions carry no count.)
    if (other.num_shards != 0 && other.num_shards != options_.num_shards && !other.DeadHere())
      throw InvalidInput(
          fmt::format("shard {}: shard {} ({}) was started with --num_shards {}, this one with {}; "
                      "start every shard of a run with the same --num_shards",
                      me, i, other.Describe(), other.num_shards, options_.num_shards));
  };
  std::vector<int> missing = WaitForAll("shard", options_.timeout, /*stoppable=*/true, same_count);
  if (!missing.empty())
    throw IoError(
        fmt::format("shard {}: {} of {} shards did not join {} within {} s: shard {}; start every shard "
                    "with the same --run_id and rendezvous flags (or raise --first_iter_timeout)",
                    me, missing.size(), options_.num_shards, description_, options_.timeout.count() / 1000,
                    ShardList(missing)));
  for (int i = 0; i < options_.num_shards; ++i) {
    std::string text = Get(fmt::format("shard/{}", i));
    Holder holder = Holder::Parse(text);
    if (i != me && holder.DeadHere())  // it died since it joined, or an earlier run left its keys
      throw IoError(
          fmt::format("shard {} of {} is held by {}, which has exited: it died, or an earlier run with "
                      "this run id left its keys (then pass a fresh {} to every shard)",
                      i, description_, holder.Describe(), options_.run_id_flag));
    holders_.push_back(text);
  }
}

std::vector<std::string> Rendezvous::AllGather(const std::string& key, const std::string& value,
                                               std::optional<std::chrono::milliseconds> timeout) {
  // Stored with a leading 'v': Gloo's FileStore cannot hold an empty value.
  Set(fmt::format("{}/{}", key, options_.shard_id), "v" + value);
  const auto limit = timeout.value_or(options_.timeout);
  std::vector<int> missing = WaitForAll(key, limit);
  if (!missing.empty())
    throw IoError(
        fmt::format("shard {}: shard {} did not publish its {} within {} s ({}); it stopped or was "
                    "killed",
                    options_.shard_id, ShardList(missing), key, limit.count() / 1000, description_));
  std::vector<std::string> values;
  for (int i = 0; i < options_.num_shards; ++i) values.push_back(Get(fmt::format("{}/{}", key, i)).substr(1));
  return values;
}

bool Rendezvous::Exited(int shard) const {
  return shard >= 0 && shard < static_cast<int>(holders_.size()) && Holder::Parse(holders_[shard]).DeadHere();
}

void Rendezvous::ReportFailure(int suspect, const std::string& what) {
  try {
    Set(fmt::format("failed/{}", options_.shard_id), fmt::format("{} {}", suspect, what));
  } catch (const Error&) {
    // Best effort: the store may be gone too, and the caller is already failing.
  }
}

std::optional<Rendezvous::Failure> Rendezvous::FailureOf(int shard) {
  try {
    const std::string key = fmt::format("failed/{}", shard);
    if (!Exists(key)) return std::nullopt;
    std::string text = Get(key);
    Failure failure;
    size_t space = text.find(' ');
    failure.suspect = std::atoi(text.substr(0, space).c_str());
    failure.what = space == std::string::npos ? "" : text.substr(space + 1);
    return failure;
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace lockstep
