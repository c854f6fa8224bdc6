// The elastic agent behind `lockstep launch`: one per machine, it starts the machine's shard processes of a
// training job, and when any shard of the job fails it stops them and starts the whole job again, from the
// newest checkpoint, under a new run id, until the job ends or --max_restarts restarts are spent.
//
// Agents meet in rounds, in their store (agent_store.h). In round r each agent claims a slot; the round forms
// when the most agents (--nnodes MIN:MAX) hold slots, or the fewest and then --join_grace seconds passed. The
// agent that forms it writes the roster: the agents sorted by id with their shard counts, the global batch
// and the checkpoint to resume from, chosen while no shard runs. Every agent derives the same shard ids from
// the roster (agent k's shards follow those of agents 0 .. k-1) and starts its shards under run id
// `<job_id>_r<r>`. An agent that sees a shard fail publishes the failure for round r (the first one published
// counts); every agent that sees it stops its shards and joins round r + 1, unless the failure repeats on
// every restart. An agent that starts again (after a crash, under a supervisor) while a round of its job runs
// fails that round when it finds its earlier self in the roster or dead on this machine.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/launch/agent_store.h"
#include "lockstep/launch/roster.h"

namespace lockstep {

struct AgentOptions {
  std::string program;                       // the lockstep binary that the shards run
  std::vector<std::string> train_arguments;  // those after `train`, passed on unchanged
  int nproc_per_node = 1;
  int min_nodes = 1, max_nodes = 1;
  int max_restarts = 3;
  double monitor_interval = 1;  // seconds between looks at the shards and the store
  double join_grace = 3;        // seconds a round waits for more than MIN agents
  double join_timeout = 600;    // seconds a round waits for MIN agents
  double stop_grace = 30;  // seconds from SIGTERM to SIGKILL when the job is stopped by a signal: for the
                           // shards' last step and checkpoint
  AgentStoreAddress rendezvous;
  std::string job_id;
  std::string agent_id;  // unique in the job; the order of ids is the order of the agents' shards
  // What the agent needs to know of the training arguments.
  std::string save_model_name;
  std::string checkpoint_directory;     // the trainer's --file_store_path
  bool train_names_file_store = false;  // the arguments give --file_store_path
  int64_t batch_size = 0;               // per shard, for the first round's shard count
  int64_t num_epochs = 0;               // a checkpoint with as many is a finished job
  double straggler_timeout = 1200;      // seconds a shard may run on after another one finished (the
                                        // trainer's slower phases: the last checkpoint, closing)
};

// The arguments of local shard `shard_id` in `round` (argv[0] the program).
std::vector<std::string> ShardArguments(const AgentOptions& options, const Roster& roster, int round,
                                        int shard_id);

// Runs the agent until the job ends; returns the exit code: 0 when every shard of the last round exited 0 or
// the newest checkpoint has every epoch; non-zero, after printing the failures one per line, when the
// restarts are spent or a shard failed in a way that repeats on every restart (exit code kExitNotRetryable:
// the job stops at once), or when the agent was stopped by SIGINT or SIGTERM. Throws InvalidInput or IoError
// on bad options or an unreachable store.
int RunAgent(const AgentOptions& options);

}  // namespace lockstep
