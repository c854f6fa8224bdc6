// The shard processes one agent of `lockstep launch` runs on its machine: started together, their output
// passed through line by line with a "[shard i] " prefix, reaped as they exit, and stopped together. Every
// child is killed by the kernel if the agent dies (PR_SET_PDEATHSIG), and runs in its own process group, so a
// Ctrl-C reaches only the agent, which then stops its shards in order: no shard outlives its agent.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace lockstep {

struct ShardExit {
  int shard = 0;           // the shard id in the job
  int exit_code = 0;       // when it exited
  int signal = 0;          // when a signal killed it (then exit_code is 0)
  double seconds = 0;      // since it started
  std::string last_error;  // its last output line that holds "error:", if any

  bool ok() const { return signal == 0 && exit_code == 0; }
  // "exited with code 1" or "was killed by SIGKILL"
  std::string Describe() const;
};

class ShardProcesses {
 public:
  // Starts `argvs[k]` (argv[0]: the program's path) as shard `shard_ids[k]`, with the agent's environment
  // less the variables named in `unset` (those by which mpirun and srun number processes), plus
  // kLinesPrefixedVariable=1, which tells the trainer that its lines are marked already. Throws IoError
  // when a process cannot be started, after stopping those already started.
  ShardProcesses(const std::vector<std::vector<std::string>>& argvs, const std::vector<int>& shard_ids,
                 const std::vector<std::string>& unset);
  ~ShardProcesses();  // Stop()
  ShardProcesses(const ShardProcesses&) = delete;
  ShardProcesses& operator=(const ShardProcesses&) = delete;

  // Passes output through for up to `wait` (less when a signal arrives) and reaps the shards that exited;
  // returns those, in the order found.
  std::vector<ShardExit> Poll(std::chrono::milliseconds wait);
  bool AllExited() const;
  std::vector<pid_t> pids() const;
  // Ends every shard still running: SIGCONT (a stopped process cannot act on SIGTERM), SIGTERM, then SIGKILL
  // after `grace`, or as soon as `hurry` (if given) says so; reaps them all and passes the rest of their
  // output through.
  void Stop(std::chrono::milliseconds grace = std::chrono::seconds(5),
            const std::function<bool()>& hurry = {});

 private:
  struct Stream {
    int fd = -1;          // read end of the pipe; -1 after end of file
    int out_fd = 1;       // where its lines go: the agent's stdout or stderr
    std::string partial;  // a line not yet ended
  };
  struct Shard {
    int id = 0;
    pid_t pid = -1;
    bool running = false;
    std::chrono::steady_clock::time_point start;
    Stream streams[2];
    std::string last_error;
  };

  void Start(Shard* shard, const std::vector<std::string>& argv, char** environment);
  // Reads what is available on the shard's streams and writes out its whole lines; with `final`, also the
  // unended rest.
  void Pump(Shard* shard, Stream* stream, bool final);
  std::vector<ShardExit> Reap(bool block);

  std::vector<Shard> shards_;
};

}  // namespace lockstep
