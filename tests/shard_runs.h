// Runs of `lockstep train` as processes of one test, shards meeting on 127.0.0.1: starting them, waiting for
// them, reading what they printed, and comparing the checkpoints they wrote.
#pragma once

#include <chrono>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "processes.h"
#include "test_util.h"

namespace lockstep::testing {

using Clock = std::chrono::steady_clock;

// Unique across runs and concurrent test processes: a run id's keys stay in its store, so ids never repeat.
std::string UniqueName(const std::string& stem);
std::chrono::milliseconds Remaining(Clock::time_point deadline);
double SecondsSince(Clock::time_point start);
std::string Describe(const std::optional<int>& code);

// The processes a test started; when the test has failed, it prints what each of them printed.
class Processes {
 public:
  ~Processes();
  Process& Start(const Args& argv, const std::string& output_path, const Args& environment = {});
  Process& operator[](size_t i) { return *processes_[i]; }
  size_t size() const { return processes_.size(); }

 private:
  std::vector<std::unique_ptr<Process>> processes_;
};

// `lockstep train` on one CPU thread with the loopback interface between shards; later flags win.
Args Train(const Args& flags);
// Flags from (name, value) pairs.
Args Flags(std::initializer_list<std::pair<const char*, std::string>> pairs);
// LeNet on Fashion-MNIST with momentum SGD, a checkpoint m_<epoch>.safetensors per epoch and the log in
// `dir`.
Args LeNet(const std::string& dir, int batch_size, int64_t epoch_size, int num_epochs);
// LeNet on synthetic images, for runs whose data does not matter.
Args NullData(const std::string& dir, int64_t epoch_size, int num_epochs);
// Starts shards 0 .. num_shards - 1 of one run; shard k prints to "<output_stem>_shard<k>.out".
void StartShards(Processes* run, const Args& flags, int num_shards, const std::string& output_stem);

// Every process exits with code 0 within `limit`; returns whether they all did.
bool ExpectAllSucceed(Processes& run, std::chrono::milliseconds limit);
// Waits until `path` exists; false if it did not appear within `limit` or a process of `run` ended first.
bool WaitForFile(const std::string& path, Processes& run, std::chrono::milliseconds limit);
// The one error line of a process's output: "lockstep: error: ..." or "lockstep: internal error: ...".
std::string ErrorLine(const std::string& output);
// The process exits non-zero before `deadline` with one error line that contains each of `parts`.
void ExpectError(Process& process, Clock::time_point deadline, const Args& parts);

struct Comparison {
  double largest_relative = 0;  // largest ||actual - expected|| / ||expected|| over the float tensors
  std::string worst_tensor;
  bool bitwise = true;
};

// Compares every tensor of two checkpoints, which must hold the same names, shapes and types, equal non-float
// tensors and the same training position (images_trained counts the whole job, whatever the shards).
Comparison CompareCheckpoints(const std::string& actual_path, const std::string& expected_path);

}  // namespace lockstep::testing
