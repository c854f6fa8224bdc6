// Where a training run starts from: --load_model_path latest resolved to a file, and a resumed run that has
// nothing left to train.
#pragma once

#include "lockstep/train/trainer_config.h"

namespace lockstep {

// With --load_model_path latest: the configuration with the newest good checkpoint of --save_model_name in
// --file_store_path, or none (a fresh start); prints which, and each file passed over with the reason. Each
// shard looks for itself; the fingerprint catches shards that found different ones.
TrainerConfig ResolveLatestCheckpoint(const TrainerConfig& config);

// True when the checkpoint resumed from has all --num_epochs, after checking its bytes: the run is complete
// and succeeds without training (a job restarted after its last checkpoint is done); prints so.
bool RunIsComplete(const TrainerConfig& config);

}  // namespace lockstep
