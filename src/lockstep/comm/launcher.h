// The shard id and count that a launcher gives each process it starts: OpenMPI's mpirun
// (OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE) or Slurm's srun (SLURM_PROCID / SLURM_NTASKS), and a job id
// that can serve as the run id (SLURM_JOB_ID, OpenMPI's PMIX_NAMESPACE).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace lockstep {

struct LauncherShards {
  int shard_id = 0, num_shards = 1;
  std::string launcher;  // "mpirun" or "srun"
  std::string job_id;    // empty when the launcher gives none
};

// Empty when the process was not started by either launcher. Throws InvalidInput on malformed variables.
std::optional<LauncherShards> ShardsFromLauncher();

// The variables by which the launchers number the processes they start (rank and size of each): a process
// that starts shards of its own removes them from their environment.
std::vector<std::string> LauncherShardVariables();

}  // namespace lockstep
