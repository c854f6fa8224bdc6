#include "shard_runs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <thread>

#include "lockstep/train/safetensors.h"

namespace lockstep::testing {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

std::string UniqueName(const std::string& stem) {
  static int counter = 0;
  return fmt::format("{}_{}_{}_{}", stem, getpid(), counter++, Clock::now().time_since_epoch().count());
}

milliseconds Remaining(Clock::time_point deadline) {
  return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string Describe(const std::optional<int>& code) {
  return code ? fmt::format("exit code {}", *code) : std::string("still running");
}

Processes::~Processes() {
  if (!::testing::Test::HasFailure()) return;
  for (size_t i = 0; i < processes_.size(); ++i)
    std::cout << fmt::format("----- process {} (pid {}) printed:\n{}\n", i, processes_[i]->pid(),
                             processes_[i]->Output());
}

Process& Processes::Start(const Args& argv, const std::string& output_path, const Args& environment) {
  processes_.push_back(std::make_unique<Process>(argv, output_path, environment));
  return *processes_.back();
}

Args Train(const Args& flags) {
  return Concat({CliPath(), "train", "--use_cpu", "--threads", "1", "--distributed_interfaces", "lo"}, flags);
}

Args Flags(std::initializer_list<std::pair<const char*, std::string>> pairs) {
  Args flags;
  for (const auto& [name, value] : pairs) flags.insert(flags.end(), {name, value});
  return flags;
}

Args LeNet(const std::string& dir, int batch_size, int64_t epoch_size, int num_epochs) {
  return Flags({{"--model", "lenet"},
                {"--train_data", "fashion-mnist"},
                {"--batch_size", std::to_string(batch_size)},
                {"--epoch_size", std::to_string(epoch_size)},
                {"--num_epochs", std::to_string(num_epochs)},
                {"--base_learning_rate", "0.1"},
                {"--momentum", "0.9"},
                {"--save_model_name", "m"},
                {"--file_store_path", dir},
                {"--log_dir", dir}});
}

Args NullData(const std::string& dir, int64_t epoch_size, int num_epochs) {
  return Flags({{"--model", "lenet"},
                {"--train_data", "null"},
                {"--num_channels", "1"},
                {"--image_size", "28"},
                {"--num_labels", "10"},
                {"--batch_size", "8"},
                {"--epoch_size", std::to_string(epoch_size)},
                {"--num_epochs", std::to_string(num_epochs)},
                {"--file_store_path", dir},
                {"--log_dir", dir}});
}

void StartShards(Processes* run, const Args& flags, int num_shards, const std::string& output_stem) {
  for (int k = 0; k < num_shards; ++k)
    run->Start(
        Train(Concat(flags, {"--num_shards", std::to_string(num_shards), "--shard_id", std::to_string(k)})),
        fmt::format("{}_shard{}.out", output_stem, k));
}

bool ExpectAllSucceed(Processes& run, milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  bool all = true;
  for (size_t i = 0; i < run.size(); ++i) {
    std::optional<int> code = run[i].Wait(Remaining(deadline));
    EXPECT_TRUE(code && *code == 0) << "process " << i << ": " << Describe(code);
    all = all && code && *code == 0;
  }
  return all;
}

bool WaitForFile(const std::string& path, Processes& run, milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (!fs::exists(path)) {
    for (size_t i = 0; i < run.size(); ++i)
      if (run[i].Wait(milliseconds(0))) return false;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

std::string ErrorLine(const std::string& output) {
  std::istringstream in(output);
  std::string found;
  int count = 0;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("lockstep: ", 0) == 0 && line.find("error: ") != std::string::npos) {
      found = line;
      ++count;
    }
  EXPECT_EQ(count, 1) << "error lines in:\n" << output;
  return found;
}

void ExpectError(Process& process, Clock::time_point deadline, const Args& parts) {
  std::optional<int> code = process.Wait(Remaining(deadline));
  ASSERT_TRUE(code) << "pid " << process.pid() << " still runs";
  EXPECT_NE(*code, 0);
  std::string line = ErrorLine(process.Output());
  for (const auto& part : parts)
    EXPECT_NE(line.find(part), std::string::npos) << "'" << part << "' not in: " << line;
}

Comparison CompareCheckpoints(const std::string& actual_path, const std::string& expected_path) {
  Comparison result;
  SafetensorsFile actual = ReadSafetensors(actual_path), expected = ReadSafetensors(expected_path);
  EXPECT_EQ(actual.tensors.size(), expected.tensors.size());
  for (const char* key : {"model", "seed", "epochs_done", "iteration", "reader_position", "images_trained"})
    EXPECT_EQ(actual.metadata[key], expected.metadata[key]) << key;
  for (const auto& [name, want] : expected.tensors) {
    auto it = actual.tensors.find(name);
    if (it == actual.tensors.end()) {
      ADD_FAILURE() << name << " is missing from " << actual_path;
      continue;
    }
    const Tensor& got = it->second;
    if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
      ADD_FAILURE() << name << " has shape " << ShapeToString(got.shape()) << " instead of "
                    << ShapeToString(want.shape()) << " or another type";
      continue;
    }
    const bool same_bytes = std::memcmp(got.raw_data(), want.raw_data(), want.nbytes()) == 0;
    result.bitwise = result.bitwise && same_bytes;
    if (want.dtype() != DataType::kFloat) {
      EXPECT_TRUE(same_bytes) << name;
      continue;
    }
    const float* a = got.data<float>();
    const float* b = want.data<float>();
    double difference = 0, norm = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      difference += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
      norm += double{b[i]} * b[i];
    }
    double relative = difference == 0 ? 0 : std::sqrt(difference) / std::max(std::sqrt(norm), 1e-30);
    if (result.worst_tensor.empty() || relative > result.largest_relative) {
      result.largest_relative = relative;
      result.worst_tensor = name;
    }
  }
  return result;
}

}  // namespace lockstep::testing
