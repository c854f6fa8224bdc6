// The `launch` command line: an elastic agent that runs the shards of `lockstep train` on this machine and
// restarts the job from its newest checkpoint when a shard fails (src/lockstep/launch/agent.h).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "lockstep/launch/agent.h"

namespace lockstep {

struct LaunchFlags {
  AgentOptions agent;  // the flags that set an agent option directly, with its defaults
  std::string nnodes;  // empty: 1, or the process count of mpirun / srun
  std::string rdzv, job_id;
  bool has_command = false;          // `--` was given
  std::vector<std::string> command;  // after `--`: train ARGS...
  std::vector<std::string> unknown;  // what the parser did not recognize before `--`
};

// Takes what follows the first `--` of `lockstep launch ...` into flags->command and returns the argument
// count before it, for the CLI parser.
int SplitLaunchCommand(int argc, char** argv, LaunchFlags* flags);
void AddLaunchFlags(CLI::App* app, LaunchFlags* flags);
// Checks the flags and the training arguments, then runs the agent; returns its exit code.
int RunLaunch(const LaunchFlags& flags);

}  // namespace lockstep
