// A directory holds a key as a file, created under a temporary name and hard-linked into place: link() fails
// when the name exists, so creation is atomic and exclusive, also on NFS. Redis holds keys with SETNX (Gloo's
// RedisStore::set), which is exclusive too.
#include "lockstep/launch/agent_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lockstep/comm/redis_store.h"
#include "lockstep/core/atomic_file.h"
#include "lockstep/core/enforce.h"

namespace lockstep {
namespace {

class DirectoryStore : public AgentStore {
 public:
  explicit DirectoryStore(const std::string& directory) : directory_(directory) {}

  bool Create(const std::string& key, const std::string& value) override {
    AtomicFile file(Path(key), description() + " entry");
    file.Write(value);
    return file.CommitIfAbsent();
  }

  std::optional<std::string> Get(const std::string& key) override {
    std::ifstream in(Path(key), std::ios::binary);
    if (!in) return std::nullopt;
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }

  std::string description() const override { return "file store " + directory_; }

 private:
  std::string Path(const std::string& key) const { return directory_ + "/" + key; }

  std::string directory_;
};

class RedisAgentStore : public AgentStore {
 public:
  RedisAgentStore(const AgentStoreAddress& address, const std::string& job_id)
      : prefix_(fmt::format("lockstep_launch/{}/", job_id)),
        description_(fmt::format("Redis {}:{}", address.redis_host, address.redis_port)) {
    try {
      redis_ = std::make_unique<RedisStore>(address.redis_host, address.redis_port, "lockstep launch");
    } catch (const IoError& e) {
      throw IoError(fmt::format("--rdzv: {}: start redis-server there or fix the address", e.what()));
    }
  }

  bool Create(const std::string& key, const std::string& value) override {
    return redis_->Create(prefix_ + key, std::vector<char>(value.begin(), value.end()));
  }

  std::optional<std::string> Get(const std::string& key) override {
    if (!redis_->check({prefix_ + key})) return std::nullopt;
    std::vector<char> value = redis_->get(prefix_ + key);
    return std::string(value.begin(), value.end());
  }

  std::string description() const override { return description_; }

 private:
  std::string prefix_, description_;
  std::unique_ptr<RedisStore> redis_;
};

}  // namespace

AgentStoreAddress ParseAgentStoreAddress(const std::string& text) {
  AgentStoreAddress address;
  const std::string redis = "redis://", file = "file://";
  if (text.rfind(file, 0) == 0 && text.size() > file.size()) {
    address.directory = text.substr(file.size());
    return address;
  }
  if (text.rfind(redis, 0) == 0) {
    const std::string rest = text.substr(redis.size());
    const size_t colon = rest.rfind(':');
    address.redis_host = rest.substr(0, colon);
    if (colon != std::string::npos) {
      const std::string port = rest.substr(colon + 1);
      char* end = nullptr;
      const long value = std::strtol(port.c_str(), &end, 10);
      if (port.empty() || *end != '\0' || value < 1 || value > 65535)
        throw InvalidInput(fmt::format("--rdzv {}: port '{}' is not in [1, 65535]", text, port));
      address.redis_port = static_cast<int>(value);
    }
    if (!address.redis_host.empty()) return address;
  }
  throw InvalidInput(
      fmt::format("--rdzv '{}': use redis://HOST:PORT or file://DIR (a directory every machine "
                  "can write)",
                  text));
}

std::unique_ptr<AgentStore> OpenAgentStore(const AgentStoreAddress& address, const std::string& job_id) {
  if (!address.redis_host.empty()) return std::make_unique<RedisAgentStore>(address, job_id);
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(address.directory, error))
    throw InvalidInput(fmt::format(
        "--rdzv file://{}: {}; create it (on a filesystem every machine shares) first", address.directory,
        fs::exists(address.directory, error) ? "not a directory" : "no such directory"));
  const std::string directory = (fs::absolute(address.directory) / fmt::format("lockstep_launch_{}", job_id))
                                    .lexically_normal()
                                    .string();
  fs::create_directories(directory, error);
  if (error || access(directory.c_str(), W_OK) != 0)
    throw IoError(fmt::format("--rdzv file://{}: cannot create or write {}", address.directory, directory));
  return std::make_unique<DirectoryStore>(directory);
}

}  // namespace lockstep
