// Where the agents of `lockstep launch` meet: a directory every machine can write (e.g. on NFS) or a Redis
// server, with keys under the job id. Keys are only ever created, never changed, and creating one is
// exclusive: of several agents that create the same key, exactly one succeeds. That is all the rounds need.
#pragma once

#include <memory>
#include <optional>
#include <string>

namespace lockstep {

// `--rdzv redis://HOST:PORT` or `--rdzv file://DIR`.
struct AgentStoreAddress {
  std::string redis_host;  // Redis when set, else the directory
  int redis_port = 6379;
  std::string directory;
};

// Throws InvalidInput naming --rdzv when `text` is neither form.
AgentStoreAddress ParseAgentStoreAddress(const std::string& text);

class AgentStore {
 public:
  virtual ~AgentStore() = default;
  // Creates `key` holding `value`; false when it exists already (another agent created it first).
  virtual bool Create(const std::string& key, const std::string& value) = 0;
  // The key's value, or nothing when it does not exist (yet).
  virtual std::optional<std::string> Get(const std::string& key) = 0;
  // "file store /dir/lockstep_launch_<job>" or "Redis host:port"
  virtual std::string description() const = 0;
};

// Opens the job's store; throws IoError when the directory cannot be written or Redis cannot be reached.
std::unique_ptr<AgentStore> OpenAgentStore(const AgentStoreAddress& address, const std::string& job_id);

}  // namespace lockstep
