// The pieces of `lockstep launch`: node ranges, batches, rosters and the shards' arguments, the store's
// addresses and exclusive keys, and the shard processes' stop.
#include <chrono>
#include <optional>
#include <string>

#include "lockstep/core/enforce.h"
#include "lockstep/launch/agent.h"
#include "lockstep/launch/agent_store.h"
#include "lockstep/launch/shard_processes.h"
#include "processes.h"
#include "shards.h"
#include "test_util.h"

namespace lockstep::testing {

using std::chrono::milliseconds;

TEST(LaunchAgent, NodeRanges) {
  EXPECT_EQ(ParseNodeRange("2"), std::make_pair(2, 2));
  EXPECT_EQ(ParseNodeRange("1:4"), std::make_pair(1, 4));
  EXPECT_THROW(ParseNodeRange("3:2"), InvalidInput);
  EXPECT_THROW(ParseNodeRange("0"), InvalidInput);
  EXPECT_THROW(ParseNodeRange("a:b"), InvalidInput);
}

TEST(LaunchAgent, BatchKeepsTheGlobalBatch) {
  EXPECT_EQ(BatchForShards(24, 3), 8);
  EXPECT_EQ(BatchForShards(24, 4), 6);
  try {
    BatchForShards(24, 5);
    ADD_FAILURE() << "24 images do not divide among 5 shards";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("are 4 and 6"), std::string::npos) << e.what();
  }
  try {
    BatchForShards(4, 5);
    ADD_FAILURE() << "4 images do not divide among 5 shards";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("keep it is 4:"), std::string::npos) << e.what();
  }
}

TEST(LaunchAgent, RosterOrdersShardsByAgent) {
  Roster roster;
  roster.global_batch = 24;
  roster.checkpoint = "/runs/m 1.safetensors";
  roster.agents = {{"a", 2}, {"b", 1}, {"c", 3}};
  Roster read = Roster::Parse(roster.ToText());
  EXPECT_EQ(read.global_batch, 24);
  EXPECT_EQ(read.checkpoint, roster.checkpoint);
  EXPECT_EQ(read.agents, roster.agents);
  EXPECT_EQ(read.num_shards(), 6);
  EXPECT_EQ(read.FirstShard("a"), 0);
  EXPECT_EQ(read.FirstShard("c"), 3);
  EXPECT_EQ(read.FirstShard("d"), -1);

  AgentOptions options;
  options.program = "/bin/lockstep";
  options.train_arguments = {"--model", "lenet"};
  options.job_id = "job";
  options.rendezvous.directory = "/store";
  const Args args = ShardArguments(options, read, 2, 4);
  const Args expected = {"/bin/lockstep",     "train",  "--model",           "lenet",
                         "--num_shards",      "6",      "--shard_id",        "4",
                         "--run_id",          "job_r2", "--batch_size",      "4",
                         "--file_store_path", "/store", "--load_model_path", roster.checkpoint};
  EXPECT_EQ(args, expected);
}

TEST(LaunchAgent, StoreAddresses) {
  EXPECT_EQ(ParseAgentStoreAddress("file:///nfs/runs").directory, "/nfs/runs");
  AgentStoreAddress redis = ParseAgentStoreAddress("redis://10.0.0.1:7000");
  EXPECT_EQ(redis.redis_host, "10.0.0.1");
  EXPECT_EQ(redis.redis_port, 7000);
  EXPECT_THROW(ParseAgentStoreAddress("nfs:/runs"), InvalidInput);
  EXPECT_THROW(ParseAgentStoreAddress("redis://host:99999"), InvalidInput);
}

// Of several creators of a key exactly one succeeds, and the value is the first one's.
void ExpectExclusiveKeys(const AgentStoreAddress& address) {
  auto first = OpenAgentStore(address, "exclusive"), second = OpenAgentStore(address, "exclusive");
  EXPECT_FALSE(first->Get("k"));
  EXPECT_TRUE(first->Create("k", "one"));
  EXPECT_FALSE(second->Create("k", "two"));
  EXPECT_EQ(second->Get("k"), std::optional<std::string>("one"));
  EXPECT_FALSE(OpenAgentStore(address, "another job")->Get("k"));
}

TEST(LaunchAgent, DirectoryStoreKeysAreExclusive) {
  TempDirectory dir;
  AgentStoreAddress address;
  address.directory = dir.path();
  ExpectExclusiveKeys(address);
}

TEST(LaunchAgent, RedisStoreKeysAreExclusive) {
  if (!RedisServer::Available()) GTEST_SKIP() << "redis-server is not installed";
  RedisServer redis;
  AgentStoreAddress address;
  address.redis_host = "127.0.0.1";
  address.redis_port = redis.port();
  ExpectExclusiveKeys(address);
}

TEST(ShardProcesses, HurryEndsTheGraceAtOnce) {
  // A shard that ignores SIGTERM would hold Stop for the whole hour.
  ShardProcesses shards({{"/bin/sh", "-c", "trap '' TERM; echo ready; exec sleep 3600"}}, {0}, {});
  shards.Poll(milliseconds(200));
  int looks = 0;
  shards.Stop(std::chrono::hours(1), [&] { return ++looks > 2; });
  EXPECT_TRUE(shards.AllExited());
  EXPECT_EQ(looks, 3);
}

}  // namespace lockstep::testing
