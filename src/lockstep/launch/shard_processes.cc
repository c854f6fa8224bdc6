#include "lockstep/launch/shard_processes.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "lockstep/core/enforce.h"
#include "lockstep/train/trainer.h"

extern char** environ;

namespace lockstep {
namespace {

// Writes all of `text` to `fd`, as one write where the pipe allows, so lines of shards do not interleave.
void WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the agent's output is gone; the shards go on regardless
    done += static_cast<size_t>(n);
  }
}

std::string SignalName(int signal) {
  const char* abbreviation = sigabbrev_np(signal);
  return abbreviation ? std::string("SIG") + abbreviation : fmt::format("signal {}", signal);
}

}  // namespace

std::string ShardExit::Describe() const {
  return signal ? "was killed by " + SignalName(signal) : fmt::format("exited with code {}", exit_code);
}

ShardProcesses::ShardProcesses(const std::vector<std::vector<std::string>>& argvs,
                               const std::vector<int>& shard_ids, const std::vector<std::string>& unset) {
  LOCKSTEP_ENFORCE_EQ(argvs.size(), shard_ids.size());
  std::vector<char*> environment;
  for (char** entry = environ; *entry; ++entry) {
    const std::string name(*entry, std::strcspn(*entry, "="));
    bool keep = name != kLinesPrefixedVariable;
    for (const auto& drop : unset) keep = keep && name != drop;
    if (keep) environment.push_back(*entry);
  }
  std::string lines_prefixed = std::string(kLinesPrefixedVariable) + "=1";  // Pump marks every line
  environment.push_back(lines_prefixed.data());
  environment.push_back(nullptr);
  shards_.resize(argvs.size());
  try {
    for (size_t k = 0; k < argvs.size(); ++k) {
      shards_[k].id = shard_ids[k];
      Start(&shards_[k], argvs[k], environment.data());
    }
  } catch (...) {
    Stop();
    throw;
  }
}

ShardProcesses::~ShardProcesses() { Stop(); }

void ShardProcesses::Start(Shard* shard, const std::vector<std::string>& argv, char** environment) {
  int pipes[2][2];
  for (auto& p : pipes)
    if (pipe2(p, O_CLOEXEC) != 0)
      throw IoError(fmt::format("cannot create a pipe: {}", std::strerror(errno)));
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const pid_t agent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw IoError(fmt::format("cannot start shard {}: {}", shard->id, std::strerror(errno)));
  if (pid == 0) {
    // The child: only async-signal-safe calls until execve.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != agent) _exit(127);  // the agent died before prctl took effect
    dup2(pipes[0][1], 1);
    dup2(pipes[1][1], 2);
    execve(args[0], args.data(), environment);
    const char message[] = "lockstep launch: error: cannot execute the shard's program\n";
    (void)!write(2, message, sizeof(message) - 1);
    _exit(127);
  }
  shard->pid = pid;
  shard->running = true;
  shard->start = std::chrono::steady_clock::now();
  for (int s = 0; s < 2; ++s) {
    close(pipes[s][1]);
    fcntl(pipes[s][0], F_SETFL, O_NONBLOCK);
    shard->streams[s].fd = pipes[s][0];
    shard->streams[s].out_fd = s == 0 ? 1 : 2;
  }
}

void ShardProcesses::Pump(Shard* shard, Stream* stream, bool final) {
  char buffer[65536];
  while (stream->fd >= 0) {
    ssize_t n = read(stream->fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;  // EAGAIN: nothing more now
    if (n == 0) {
      close(stream->fd);
      stream->fd = -1;
      final = true;
      break;
    }
    stream->partial.append(buffer, static_cast<size_t>(n));
  }
  std::string out;
  size_t begin = 0;
  for (size_t end; (end = stream->partial.find('\n', begin)) != std::string::npos; begin = end + 1) {
    const std::string line = stream->partial.substr(begin, end - begin);
    if (line.find("error:") != std::string::npos) shard->last_error = line;
    out += fmt::format("[shard {}] {}\n", shard->id, line);
  }
  stream->partial.erase(0, begin);
  if (final && !stream->partial.empty()) {
    out += fmt::format("[shard {}] {}\n", shard->id, stream->partial);
    stream->partial.clear();
  }
  if (!out.empty()) WriteAll(stream->out_fd, out);
}

std::vector<ShardExit> ShardProcesses::Reap(bool block) {
  std::vector<ShardExit> exits;
  for (Shard& shard : shards_) {
    if (!shard.running) continue;
    int status = 0;
    pid_t done;
    do done = waitpid(shard.pid, &status, block ? 0 : WNOHANG);
    while (done < 0 && errno == EINTR);
    if (done != shard.pid) continue;
    shard.running = false;
    for (Stream& stream : shard.streams) Pump(&shard, &stream, /*final=*/true);
    ShardExit exit;
    exit.shard = shard.id;
    if (WIFSIGNALED(status))
      exit.signal = WTERMSIG(status);
    else
      exit.exit_code = WEXITSTATUS(status);
    exit.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - shard.start).count();
    exit.last_error = shard.last_error;
    exits.push_back(exit);
  }
  return exits;
}

std::vector<ShardExit> ShardProcesses::Poll(std::chrono::milliseconds wait) {
  std::vector<pollfd> fds;
  std::vector<std::pair<Shard*, Stream*>> owners;
  for (Shard& shard : shards_)
    for (Stream& stream : shard.streams)
      if (stream.fd >= 0) {
        fds.push_back({stream.fd, POLLIN, 0});
        owners.emplace_back(&shard, &stream);
      }
  if (fds.empty())
    std::this_thread::sleep_for(std::min(wait, std::chrono::milliseconds(100)));
  else if (poll(fds.data(), fds.size(), static_cast<int>(wait.count())) > 0)
    for (size_t i = 0; i < fds.size(); ++i)
      if (fds[i].revents) Pump(owners[i].first, owners[i].second, /*final=*/false);
  return Reap(/*block=*/false);
}

bool ShardProcesses::AllExited() const {
  for (const Shard& shard : shards_)
    if (shard.running) return false;
  return true;
}

std::vector<pid_t> ShardProcesses::pids() const {
  std::vector<pid_t> pids;
  for (const Shard& shard : shards_) pids.push_back(shard.pid);
  return pids;
}

void ShardProcesses::Stop(std::chrono::milliseconds grace, const std::function<bool()>& hurry) {
  for (Shard& shard : shards_)
    if (shard.running) {
      kill(shard.pid, SIGCONT);
      kill(shard.pid, SIGTERM);
    }
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (!AllExited() && std::chrono::steady_clock::now() < deadline && !(hurry && hurry()))
    Poll(std::chrono::milliseconds(50));
  for (Shard& shard : shards_)
    if (shard.running) kill(shard.pid, SIGKILL);
  Reap(/*block=*/true);
  for (Shard& shard : shards_)
    for (Stream& stream : shard.streams) Pump(&shard, &stream, /*final=*/true);
}

}  // namespace lockstep
