// One rule for every output folder of a run, for one process as for many shards, and for the names and line
// prefixes of a shard's outputs.
#include "lockstep/train/run_outputs.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "lockstep/core/output_directory.h"
#include "lockstep/train/checkpoint.h"
#include "lockstep/train/trainer.h"

namespace lockstep {

std::string ShardFileName(const std::string& path, int shard_id) {
  if (shard_id == 0) return path;
  const size_t dot = path.rfind('.');
  const bool has_extension = dot != std::string::npos && path.find('/', dot) == std::string::npos;
  std::string named = path;
  named.insert(has_extension ? dot : path.size(), fmt::format("_shard{}", shard_id));
  return named;
}

bool LinesPrefixedByLauncher() {
  const char* value = std::getenv(kLinesPrefixedVariable);
  return value && std::string(value) == "1";
}

std::string ShardPrefix(const TrainerConfig& config) {
  if (config.num_shards == 1 || LinesPrefixedByLauncher()) return "";
  return fmt::format("shard {}: ", config.shard_id);
}

CheckpointClaim::CheckpointClaim(const std::string& store, const std::string& name) {
  const std::string path = fmt::format("{}/.{}.lock", store, name);
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) ThrowErrno(fmt::format("--file_store_path {}: cannot create {}", store, path));
  if (LockForThisProcess(fd_)) return;
  ::close(fd_);
  fd_ = -1;
  throw InvalidInput(fmt::format(
      "--save_model_name {}: another running process saves checkpoints of this name in {}; pass another "
      "--save_model_name or --file_store_path, or wait until that run ends",
      name, store));
}

CheckpointClaim::~CheckpointClaim() {
  if (fd_ >= 0) ::close(fd_);
}

std::unique_ptr<CheckpointClaim> PrepareRunOutputs(const TrainerConfig& config) {
  PrepareOutputDirectory(config.log_dir.empty() ? "." : config.log_dir, "--log_dir", IfMissing::kCreate);
  if (!config.iter_log.empty()) PrepareOutputFile(config.iter_log, "--iter_log");
  if (!config.tensorboard_dir.empty())
    PrepareOutputDirectory(config.tensorboard_dir, "--tensorboard_dir", IfMissing::kCreate);
  // A directory where the shards meet must be the one every machine shares: the rendezvous refuses a missing
  // one rather than create a local folder that no other shard sees.
  const bool shards_meet_there = config.num_shards > 1 && config.redis_host.empty();
  if (config.save_model_name.empty() || config.shard_id != 0) return nullptr;
  const std::string store = config.file_store_path.empty() ? "." : config.file_store_path;
  if (!shards_meet_there) PrepareOutputDirectory(store, "--file_store_path", IfMissing::kCreate);
  std::error_code error;
  if (!std::filesystem::is_directory(store, error)) return nullptr;  // the rendezvous says so
  auto claim = std::make_unique<CheckpointClaim>(store, config.save_model_name);
  // No process writes this name's checkpoints but this one now: a temporary of one is what a killed run left.
  for (const std::string& partial : PartialCheckpointsOf(store, config.save_model_name)) {
    if (std::filesystem::remove(partial, error))
      fmt::print("removed {}, a checkpoint a stopped run was writing\n", partial);
  }
  // A fresh run, or one resumed from another run's checkpoint or from an earlier point of this one, would
  // write over the checkpoints of the same name there, epoch by epoch. "latest" resumes this name's own.
  if (config.load_model_path == "latest") return claim;
  const std::vector<std::string> earlier = CheckpointsOf(store, config.save_model_name);
  if (earlier.empty()) return claim;
  const bool own = std::any_of(earlier.begin(), earlier.end(), [&](const std::string& path) {
    return std::filesystem::equivalent(path, config.load_model_path, error);
  });
  if (own) {
    const std::vector<std::string> later =
        CheckpointsAfter(store, config.save_model_name, config.load_model_path);
    if (later.empty()) return claim;
    throw InvalidInput(fmt::format(
        "--load_model_path {}: {} holds {} checkpoint(s) of {} taken later ({}), which this run would "
        "overwrite; resume from the newest (--load_model_path latest), or move the later ones away to go "
        "back",
        config.load_model_path, store, later.size(), config.save_model_name, later.back()));
  }
  // Name the newest: the file names sort epoch 10 before epoch 9.
  const std::string newest = LatestCheckpoint(store, config.save_model_name);
  throw InvalidInput(fmt::format(
      "--save_model_name {}: {} holds {} checkpoint(s) of an earlier run ({}), which this run{} would "
      "overwrite; {}pass another --save_model_name or --file_store_path",
      config.save_model_name, store, earlier.size(), newest.empty() ? earlier.back() : newest,
      config.load_model_path.empty() ? "" : ", resumed from " + config.load_model_path + ",",
      config.load_model_path.empty() ? "resume it with --load_model_path latest, or " : ""));
}

}  // namespace lockstep
