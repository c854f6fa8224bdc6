// Child processes for multi-process tests: each started with posix_spawn, its stdout and stderr in a file,
// waited for with a deadline, and ended by its pid when the test is done with it. RedisServer runs a real
// redis-server on a free 127.0.0.1 port for as long as the object lives.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::testing {

using Args = std::vector<std::string>;  // a command line

inline Args Concat(Args first, const Args& second) {
  first.insert(first.end(), second.begin(), second.end());
  return first;
}

class Process {
 public:
  // argv[0] is the program's path; `environment` entries ("NAME=value") are added to this process's.
  Process(const std::vector<std::string>& argv, const std::string& output_path,
          const std::vector<std::string>& environment = {});
  ~Process();  // kills and reaps the child if it still runs
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  // The exit code (128 + signal when killed), or nothing if it still runs after `limit`.
  std::optional<int> Wait(std::chrono::milliseconds limit);
  void Signal(int signal);
  std::string Output() const;  // what it printed so far

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::string output_path_;
};

// A port on 127.0.0.1 that nothing listened on a moment ago.
int FreeLoopbackPort();

class RedisServer {
 public:
  static bool Available();  // redis-server is installed
  RedisServer();            // starts it and waits until it accepts connections; throws if it does not
  ~RedisServer();
  int port() const { return port_; }
  // Kills the server (SIGKILL) and starts a new one on the same port, empty, as after a crash.
  void Restart();
  // Stops the server (SIGSTOP), which then answers nothing, as a frozen or cut-off machine; and goes on.
  void Pause() { process_->Signal(SIGSTOP); }
  void Resume() { process_->Signal(SIGCONT); }

 private:
  void Start();

  int port_ = 0;
  std::optional<Process> process_;
};

}  // namespace lockstep::testing
