// The folders a training run writes into, made ready before its first step.
#pragma once

#include "lockstep/train/trainer_config.h"

namespace lockstep {

// Creates (as `mkdir -p`) or checks the folders of this shard's outputs: --log_dir, --iter_log's folder and,
// with --save_model_name on shard 0, --file_store_path. Throws IoError, one line naming the flag, when one
// cannot be written. A --file_store_path where several shards meet is only checked, by the rendezvous.
void PrepareRunOutputs(const TrainerConfig& config);

}  // namespace lockstep
