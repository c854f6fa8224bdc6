// One rule for every output folder of a run, for one process as for many shards.
#include "lockstep/train/run_outputs.h"

#include "lockstep/core/output_directory.h"

namespace lockstep {

void PrepareRunOutputs(const TrainerConfig& config) {
  PrepareOutputDirectory(config.log_dir.empty() ? "." : config.log_dir, "--log_dir", IfMissing::kCreate);
  if (!config.iter_log.empty())
    PrepareOutputDirectory(DirectoryOf(config.iter_log), "--iter_log", IfMissing::kCreate);
  // A directory where the shards meet must be the one every machine shares: the rendezvous refuses a missing
  // one rather than create a local folder that no other shard sees.
  const bool shards_meet_there = config.num_shards > 1 && config.redis_host.empty();
  if (!config.save_model_name.empty() && config.shard_id == 0 && !shards_meet_there)
    PrepareOutputDirectory(config.file_store_path.empty() ? "." : config.file_store_path, "--file_store_path",
                           IfMissing::kCreate);
}

}  // namespace lockstep
