#include "shards.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <exception>
#include <filesystem>
#include <stdexcept>
#include <thread>
#include <vector>

#include "lockstep/comm/gloo_communicator.h"
#include "lockstep/comm/rendezvous.h"

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

GlooOptions Loopback(const std::string& algorithm, std::vector<std::string> interfaces) {
  GlooOptions options;
  options.interfaces = std::move(interfaces);
  options.algorithm = algorithm;
  options.timeout = std::chrono::seconds(20);  // bounds the wait should a shard fail
  options.first_iter_timeout = std::chrono::seconds(20);
  return options;
}

namespace {

std::shared_ptr<Rendezvous> Join(const TempDirectory& store, int shards, int shard) {
  RendezvousOptions options;
  options.num_shards = shards;
  options.shard_id = shard;
  options.run_id = "job";
  options.file_store_path = store.path();
  options.timeout = std::chrono::seconds(20);
  return std::make_shared<Rendezvous>(options);
}

}  // namespace

void OnJoinedShards(int shards, const std::function<void(int, std::shared_ptr<Rendezvous>)>& body) {
  TempDirectory store;
  OnShards(shards, [&](int shard) { body(shard, Join(store, shards, shard)); });
}

void OnConnectedShards(int shards, const GlooOptions& options,
                       const std::function<void(int, GlooCommunicator&)>& body) {
  OnJoinedShards(shards, [&](int shard, std::shared_ptr<Rendezvous> rendezvous) {
    GlooCommunicator communicator(rendezvous, options);
    EXPECT_EQ(communicator.rank(), shard);
    EXPECT_EQ(communicator.size(), shards);
    try {
      body(shard, communicator);
    } catch (const std::exception& e) {
      rendezvous->ReportFailure(-1, e.what());  // the others stop waiting below
      throw;
    }
    // Gloo fails a collective whose peer closes the connection before this side has taken in the last bytes,
    // so no shard closes its connections until every shard has left its last collective.
    rendezvous->AllGather("finished", "1");
  });
}

}  // namespace lockstep::testing
