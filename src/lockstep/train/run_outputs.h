// The folders a training run writes into, made ready before its first step, and the names and line prefixes
// of a shard's outputs.
#pragma once

#include <string>

#include "lockstep/train/trainer_config.h"

namespace lockstep {

// Creates (as `mkdir -p`) or checks the folders of this shard's outputs: --log_dir, --iter_log's folder and,
// with --save_model_name on shard 0, --file_store_path. Throws IoError, one line naming the flag, when one
// cannot be written. A --file_store_path where several shards meet is only checked, by the rendezvous. A run
// that does not resume (no --load_model_path) is refused, InvalidInput, where checkpoints of its
// --save_model_name exist already: it would overwrite them.
void PrepareRunOutputs(const TrainerConfig& config);

// A file of shard k > 0 gets "_shard{k}" before its extension: shards may share a directory, and shard 0
// keeps the plain name.
std::string ShardFileName(const std::string& path, int shard_id);

// Whether `lockstep launch` marks this process's lines (kLinesPrefixedVariable).
bool LinesPrefixedByLauncher();

// "shard k: " before the lines of a shard of several, which may share a terminal or a log; none when the
// launcher marks them already.
std::string ShardPrefix(const TrainerConfig& config);

}  // namespace lockstep
