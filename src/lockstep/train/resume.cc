// Where a training run starts from, on top of the checkpoints of a directory.
#include "lockstep/train/resume.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "lockstep/core/enforce.h"
#include "lockstep/train/checkpoint.h"
#include "lockstep/train/safetensors.h"

namespace lockstep {

TrainerConfig ResolveLatestCheckpoint(const TrainerConfig& config) {
  if (config.load_model_path != "latest") return config;
  TrainerConfig resolved = config;
  std::vector<std::string> skipped;
  resolved.load_model_path = LatestCheckpoint(config.file_store_path, config.save_model_name, &skipped);
  for (const std::string& why : skipped) fmt::print("--load_model_path latest: passed over: {}\n", why);
  if (resolved.load_model_path.empty() && !skipped.empty())  // a fresh start would write over them
    throw InvalidInput(
        fmt::format("--load_model_path latest: none of the {} file(s) named as checkpoints of {} in {} can "
                    "be resumed (each passed over above); move them away to start afresh, or pass "
                    "--load_model_path of a good checkpoint",
                    skipped.size(), config.save_model_name,
                    config.file_store_path.empty() ? "." : config.file_store_path));
  if (resolved.load_model_path.empty())
    fmt::print("--load_model_path latest: no checkpoint {}_*.safetensors in {}; starting fresh\n",
               config.save_model_name, config.file_store_path);
  else
    fmt::print("--load_model_path latest: resuming from {}\n", resolved.load_model_path);
  return resolved;
}

bool RunIsComplete(const TrainerConfig& config) {
  if (config.load_model_path.empty()) return false;
  const int64_t epochs_done = CheckpointEpochsDone(config.load_model_path);
  if (epochs_done < config.num_epochs) return false;
  VerifySafetensors(config.load_model_path);
  fmt::print(
      "checkpoint {} has {} epochs of --num_epochs {}: the run is complete (raise --num_epochs to train "
      "further)\n",
      config.load_model_path, epochs_done, config.num_epochs);
  return true;
}

}  // namespace lockstep
