// The folders a training run writes into, made ready before its first step, and the names and line prefixes
// of a shard's outputs.
#pragma once

#include <memory>
#include <string>

#include "lockstep/train/trainer_config.h"

namespace lockstep {

// This process's claim on the checkpoints {save_model_name}_* in a folder, held while it lives (an advisory
// lock on the file .{save_model_name}.lock there): a second run saving the same name in the same folder is
// refused (InvalidInput) instead of both writing the same files.
class CheckpointClaim {
 public:
  CheckpointClaim(const std::string& store, const std::string& name);
  ~CheckpointClaim();
  CheckpointClaim(const CheckpointClaim&) = delete;
  CheckpointClaim& operator=(const CheckpointClaim&) = delete;

 private:
  int fd_ = -1;
};

// Creates (as `mkdir -p`) or checks the folders of this shard's outputs: --log_dir, --iter_log's folder and,
// with --save_model_name on shard 0, --file_store_path. Throws IoError, one line naming the flag, when one
// cannot be written. A --file_store_path where several shards meet is only checked, by the rendezvous.
// Refused, InvalidInput, where checkpoints of its --save_model_name exist already that the run would write
// over: a run that does not resume, one resumed from another run's checkpoint, or from an earlier point of
// this one. Returns the claim on the checkpoint name (hold it for the run), or none where this shard writes
// no checkpoints.
std::unique_ptr<CheckpointClaim> PrepareRunOutputs(const TrainerConfig& config);

// A file of shard k > 0 gets "_shard{k}" before its extension: shards may share a directory, and shard 0
// keeps the plain name.
std::string ShardFileName(const std::string& path, int shard_id);

// Whether `lockstep launch` marks this process's lines (kLinesPrefixedVariable).
bool LinesPrefixedByLauncher();

// "shard k: " before the lines of a shard of several, which may share a terminal or a log; none when the
// launcher marks them already.
std::string ShardPrefix(const TrainerConfig& config);

}  // namespace lockstep
