#include "lockstep/comm/launcher.h"

#include <cstdlib>

#include "lockstep/core/enforce.h"

namespace lockstep {
namespace {

int IntVariable(const char* name) {
  const char* text = std::getenv(name);
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || value < 0 || value > (1 << 20))
    throw InvalidInput(fmt::format("environment variable {}='{}' is not a valid count or index", name, text));
  return static_cast<int>(value);
}

std::string Variable(const char* name) {
  const char* text = std::getenv(name);
  return text ? text : "";
}

struct Launcher {
  const char *name, *rank, *size, *job;
};
const Launcher kLaunchers[] = {{"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_NAMESPACE"},
                               {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_ID"}};

}  // namespace

std::optional<LauncherShards> ShardsFromLauncher() {
  for (const auto& l : kLaunchers) {
    if (!std::getenv(l.rank) || !std::getenv(l.size)) continue;
    LauncherShards shards{IntVariable(l.rank), IntVariable(l.size), l.name, Variable(l.job)};
    if (shards.num_shards < 1 || shards.shard_id >= shards.num_shards)
      throw InvalidInput(fmt::format("{}: {}={} is not below {}={}", l.name, l.rank, shards.shard_id, l.size,
                                     shards.num_shards));
    return shards;
  }
  return std::nullopt;
}

std::vector<std::string> LauncherShardVariables() {
  std::vector<std::string> names;
  for (const auto& l : kLaunchers) names.insert(names.end(), {l.rank, l.size});
  return names;
}

}  // namespace lockstep
