#include "shards.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <exception>
#include <filesystem>
#include <stdexcept>
#include <thread>
#include <vector>

namespace lockstep::testing {

TempDirectory::TempDirectory() {
  std::string pattern = ::testing::TempDir() + "/lockstep_XXXXXX";
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
  path_ = pattern;
}

TempDirectory::~TempDirectory() { std::filesystem::remove_all(path_); }

void OnShards(int shards, const std::function<void(int)>& body) {
  std::vector<std::exception_ptr> errors(shards);
  std::vector<std::thread> threads;
  for (int shard = 0; shard < shards; ++shard)
    threads.emplace_back([&, shard] {
      try {
        body(shard);
      } catch (...) {
        errors[shard] = std::current_exception();
      }
    });
  for (auto& thread : threads) thread.join();
  std::string messages;
  for (int shard = 0; shard < shards; ++shard) {
    if (!errors[shard]) continue;
    try {
      std::rethrow_exception(errors[shard]);
    } catch (const std::exception& e) {
      messages += fmt::format("\n  thread {}: {}", shard, e.what());
    }
  }
  if (!messages.empty()) throw std::runtime_error("threads failed:" + messages);
}

}  // namespace lockstep::testing
