#include "processes.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace lockstep::testing {

Process::Process(const std::vector<std::string>& argv, const std::string& output_path,
                 const std::vector<std::string>& environment)
    : output_path_(output_path) {
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env;
  for (char** e = environ; *e; ++e) env.push_back(*e);
  for (const auto& entry : environment) env.push_back(const_cast<char*>(entry.c_str()));
  env.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  int error = posix_spawn(&pid_, argv[0].c_str(), &actions, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(error));
}

Process::~Process() {
  if (exit_code_) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

std::optional<int> Process::Wait(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!exit_code_) {
    int status = 0;
    pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return exit_code_;
}

void Process::Signal(int signal) {
  if (!exit_code_) kill(pid_, signal);
}

std::string Process::Output() const {
  std::ifstream in(output_path_);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    close(fd);
    throw std::runtime_error(std::string("no free loopback port: ") + std::strerror(errno));
  }
  close(fd);
  return ntohs(address.sin_port);
}

namespace {

const char* kRedisServer = "/usr/bin/redis-server";

bool Accepts(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  bool connected = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return connected;
}

}  // namespace

bool RedisServer::Available() { return access(kRedisServer, X_OK) == 0; }

RedisServer::RedisServer() : port_(FreeLoopbackPort()) { Start(); }

void RedisServer::Restart() {
  process_->Signal(SIGKILL);
  process_->Wait(std::chrono::seconds(5));
  process_.reset();
  Start();
}

void RedisServer::Start() {
  std::string log = ::testing::TempDir() + "/redis_" + std::to_string(port_) + ".log";
  process_.emplace(
      std::vector<std::string>{kRedisServer, "--port", std::to_string(port_), "--bind", "127.0.0.1", "--save",
                               "", "--appendonly", "no", "--daemonize", "no"},
      log);
  for (int i = 0; i < 250 && !Accepts(port_); ++i) {
    if (process_->Wait(std::chrono::milliseconds(20)))
      throw std::runtime_error("redis-server exited at once: " + process_->Output());
  }
  if (!Accepts(port_)) throw std::runtime_error("redis-server did not accept connections within 5 s");
}

RedisServer::~RedisServer() {
  process_->Signal(SIGTERM);
  if (!process_->Wait(std::chrono::seconds(5))) process_->Signal(SIGKILL);
}

}  // namespace lockstep::testing
