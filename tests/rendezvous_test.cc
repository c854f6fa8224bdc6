// Rendezvous: shards as threads meet on a file store and on a real Redis, gather values in shard order, keep
// runs apart by run id, and report taken or stale places, missing shards, bad stores and failed shards.
#include "lockstep/comm/rendezvous.h"

#include "lockstep/comm/redis_store.h"

#define HIREDIS_NESTED_INCLUDE
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/redis_store.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <thread>

#include "lockstep/core/enforce.h"
#include "lockstep/core/stop_signals.h"
#include "processes.h"
#include "shards.h"

namespace lockstep::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

// The pid of a process that has exited and been reaped: what an earlier run's shard leaves behind.
long ExitedPid() {
  Process child({"/bin/true"}, "/dev/null");
  EXPECT_EQ(child.Wait(seconds(10)), 0);
  return child.pid();
}

// Each test gets an empty directory for the file store and, for the Redis flavour, its own redis-server.
class RendezvousTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "redis") {
      if (!RedisServer::Available()) GTEST_SKIP() << "redis-server is not installed";
      redis_ = std::make_unique<RedisServer>();
    }
  }

  RendezvousOptions Options(int shards, int shard, const std::string& run_id) const {
    RendezvousOptions options;
    options.num_shards = shards;
    options.shard_id = shard;
    options.run_id = run_id;
    options.timeout = seconds(30);
    if (redis_) {
      options.redis_host = "127.0.0.1";
      options.redis_port = redis_->port();
    } else {
      options.file_store_path = directory_.path();
    }
    return options;
  }

  // The store under the rendezvous, without the run id's prefix.
  std::unique_ptr<gloo::rendezvous::Store> BackingStore() const {
    if (redis_) return std::make_unique<gloo::rendezvous::RedisStore>("127.0.0.1", redis_->port());
    const std::string keys = directory_ / kRendezvousKeysFolder;
    std::filesystem::create_directories(keys);
    return std::make_unique<gloo::rendezvous::FileStore>(keys);
  }

  // Joins every shard of a run, each on its own thread.
  std::vector<std::unique_ptr<Rendezvous>> JoinAll(int shards, const std::string& run_id) const {
    std::vector<std::unique_ptr<Rendezvous>> joined(shards);
    OnShards(shards, [&](int shard) {
      joined[shard] = std::make_unique<Rendezvous>(Options(shards, shard, run_id));
    });
    return joined;
  }

  TempDirectory directory_;
  std::unique_ptr<RedisServer> redis_;
};

TEST_P(RendezvousTest, AllShardsJoinAndGatherInShardOrder) {
  for (int shards : {1, 2, 3}) {
    SCOPED_TRACE(std::to_string(shards) + " shards");
    std::vector<std::vector<std::string>> gathered(shards), again(shards);
    OnShards(shards, [&](int shard) {
      Rendezvous rendezvous(Options(shards, shard, "gather" + std::to_string(shards)));
      EXPECT_EQ(rendezvous.shard(), shard);
      EXPECT_EQ(rendezvous.num_shards(), shards);
      gathered[shard] = rendezvous.AllGather("value", "from shard " + std::to_string(shard));
      again[shard] = rendezvous.AllGather("second", std::string(shard + 1, 'x'));
    });
    std::vector<std::string> expected, expected_again;
    for (int shard = 0; shard < shards; ++shard) {
      expected.push_back("from shard " + std::to_string(shard));
      expected_again.push_back(std::string(shard + 1, 'x'));
    }
    for (int shard = 0; shard < shards; ++shard) {
      EXPECT_EQ(gathered[shard], expected) << "shard " << shard;
      EXPECT_EQ(again[shard], expected_again) << "shard " << shard;
    }
  }
}

TEST_P(RendezvousTest, EmptyValuesAreGathered) {
  // A single shard's communicator publishes no peer addresses, for one.
  std::vector<std::vector<std::string>> gathered(2);
  OnShards(2, [&](int shard) {
    Rendezvous rendezvous(Options(2, shard, "empty"));
    gathered[shard] = rendezvous.AllGather("value", shard == 0 ? "" : "1");
  });
  for (int shard = 0; shard < 2; ++shard) EXPECT_EQ(gathered[shard], (std::vector<std::string>{"", "1"}));
}

TEST_P(RendezvousTest, TakenPlaceIsAlreadyHeld) {
  Rendezvous first(Options(1, 0, "taken"));
  try {
    Rendezvous second(Options(1, 0, "taken"));
    FAIL() << "a second shard 0 joined";
  } catch (const InvalidInput& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("already held"), std::string::npos) << message;
    EXPECT_NE(message.find("pid " + std::to_string(getpid())), std::string::npos) << message;
    EXPECT_EQ(message.find("exited"), std::string::npos) << "the holder still runs: " << message;
  }
}

TEST_P(RendezvousTest, PlaceOfAnExitedProcessIsStale) {
  const std::string stale = fmt::format("{} {} {}", HostName(), ExitedPid(), std::time(nullptr));
  BackingStore()->set("stale/shard/0", std::vector<char>(stale.begin(), stale.end()));
  try {
    Rendezvous rendezvous(Options(1, 0, "stale"));
    FAIL() << "joined over an earlier run's place";
  } catch (const InvalidInput& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("exited"), std::string::npos) << message;
    EXPECT_NE(message.find("fresh --run_id"), std::string::npos) << message;
  }
}

TEST_P(RendezvousTest, StalePlaceOfAnotherShardIsFoundAfterJoining) {
  const std::string stale = fmt::format("{} {} {}", HostName(), ExitedPid(), std::time(nullptr));
  BackingStore()->set("stale1/shard/1", std::vector<char>(stale.begin(), stale.end()));
  try {
    Rendezvous rendezvous(Options(2, 0, "stale1"));
    FAIL() << "met an earlier run's shard 1";
  } catch (const IoError& e) {  // retryable: under the launcher it is a shard that died since it joined
    std::string message = e.what();
    EXPECT_NE(message.find("shard 1"), std::string::npos) << message;
    EXPECT_NE(message.find("exited"), std::string::npos) << message;
    EXPECT_NE(message.find("fresh --run_id"), std::string::npos) << message;
  }
}

TEST_P(RendezvousTest, DifferentRunIdsNeverMeet) {
  // Jobs A and B, two shards each, start interleaved on the same store.
  const std::vector<std::string> runs{"A", "B"};
  std::vector<std::vector<std::string>> gathered(4);
  OnShards(4, [&](int thread) {
    const std::string& run = runs[thread % 2];
    const int shard = thread / 2;
    Rendezvous rendezvous(Options(2, shard, run));
    gathered[thread] = rendezvous.AllGather("value", run + std::to_string(shard));
  });
  for (int thread = 0; thread < 4; ++thread) {
    const std::string& run = runs[thread % 2];
    EXPECT_EQ(gathered[thread], (std::vector<std::string>{run + "0", run + "1"})) << "run " << run;
  }
}

TEST_P(RendezvousTest, ShardsStartedWithDifferentCountsAreRefusedAtOnce) {
  std::vector<std::string> errors(2);
  OnShards(2, [&](int shard) {
    try {
      Rendezvous rendezvous(Options(shard == 0 ? 2 : 3, shard, "counts"));
    } catch (const InvalidInput& e) {
      errors[shard] = e.what();
    }
  });
  EXPECT_TRUE(
      std::regex_match(errors[0], std::regex("shard 0: shard 1 \\(pid [0-9]+ on host .*\\) was started with "
                                             "--num_shards 3, this one with 2; start every shard of a "
                                             "run with the same --num_shards")))
      << errors[0];
  EXPECT_NE(errors[1].find("was started with --num_shards 2, this one with 3"), std::string::npos)
      << errors[1];
}

TEST_P(RendezvousTest, MissingShardDidNotJoin) {
  RendezvousOptions options = Options(2, 0, "missing");
  options.timeout = seconds(1);
  const auto start = std::chrono::steady_clock::now();
  try {
    Rendezvous rendezvous(options);
    FAIL() << "joined without shard 1";
  } catch (const IoError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("did not join"), std::string::npos) << message;
    EXPECT_NE(message.find("shard 1"), std::string::npos) << message;
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, options.timeout) << "gave up before the timeout";
  // The shard gave its place back: the same command runs again once shard 1 comes.
  EXPECT_EQ(JoinAll(2, "missing").size(), 2u);
}

TEST_P(RendezvousTest, ShardStoppedWhileWaitingGivesItsPlaceBack) {
  {
    StopOnSignals guard;
    raise(SIGINT);  // Ctrl-C while shard 0 waits for shard 1
    EXPECT_THROW(Rendezvous(Options(2, 0, "again")), Stopped);
  }
  StopOnSignals fresh;  // as in a new process: no stop requested
  // Shard 1 meanwhile finds no shard 0.
  RendezvousOptions alone = Options(2, 1, "again");
  alone.timeout = seconds(1);
  EXPECT_THROW(Rendezvous{alone}, IoError);
  EXPECT_EQ(JoinAll(2, "again").size(), 2u);
}

TEST_P(RendezvousTest, FailureBoardNamesTheShardThatStopped) {
  auto shards = JoinAll(2, "board");
  EXPECT_FALSE(shards[0]->FailureOf(1));
  shards[1]->ReportFailure(0, "lost shard 0 during Allreduce");
  auto failure = shards[0]->FailureOf(1);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->suspect, 0);
  EXPECT_EQ(failure->what, "lost shard 0 during Allreduce");
  EXPECT_FALSE(shards[1]->FailureOf(0)) << "shard 0 reported nothing";

  shards[0]->ReportFailure(-1, "out of memory");
  failure = shards[1]->FailureOf(0);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->suspect, -1);
  EXPECT_EQ(failure->what, "out of memory");

  // Shard 1 will never publish: the wait ends at once instead of after the 30 s timeout, which would say
  // "did not publish".
  try {
    shards[0]->AllGather("step", "0");
    FAIL() << "gathered without shard 1";
  } catch (const IoError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("shard 1 stopped on an error"), std::string::npos) << message;
    EXPECT_NE(message.find("lost shard 0 during Allreduce"), std::string::npos) << message;
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, RendezvousTest, ::testing::Values("file", "redis"),
                         [](const auto& info) { return info.param == "file" ? "FileStore" : "Redis"; });

TEST(RendezvousOptionsTest, UnreachableRedis) {
  RendezvousOptions options;
  options.run_id = "unreachable";
  options.redis_host = "127.0.0.1";
  options.redis_port = FreeLoopbackPort();
  try {
    Rendezvous rendezvous(options);
    FAIL() << "joined through a Redis that does not run";
  } catch (const IoError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("cannot reach Redis"), std::string::npos) << message;
    EXPECT_NE(message.find(std::to_string(options.redis_port)), std::string::npos) << message;
  }
}

// A Redis server that answers nothing (stopped, or cut off) fails an operation once the store has tried to
// connect again for its time, instead of leaving it waiting for ever; one that answers again serves anew.
TEST(RedisStoreTest, AServerThatAnswersNothingFailsTheOperation) {
  if (!RedisServer::Available()) GTEST_SKIP() << "redis-server is not installed";
  RedisServer server;
  RedisStore store("127.0.0.1", server.port(), "test", seconds(1));
  store.set("before", {'1'});
  server.Pause();
  try {
    store.check({"before"});
    ADD_FAILURE() << "a stopped server answered";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("looking up keys failed for 1 s: no answer within 5 s"),
              std::string::npos)
        << e.what();
  }
  server.Resume();
  EXPECT_TRUE(store.check({"before"}));
}

// The message of the error that joining with `options` throws, which must be of type E.
template <class E>
std::string JoinError(const RendezvousOptions& options) {
  try {
    Rendezvous rendezvous(options);
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong error type: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "joined";
  return "";
}

TEST(RendezvousOptionsTest, BadOptionsAreRefused) {
  TempDirectory temp;
  const fs::path directory = temp.path();
  RendezvousOptions options;
  options.run_id = "bad";

  options.file_store_path = (directory / "nowhere").string();
  EXPECT_NE(JoinError<InvalidInput>(options).find("does not exist"), std::string::npos);

  options.file_store_path = (directory / "file").string();
  std::ofstream(options.file_store_path) << "not a directory";
  EXPECT_NE(JoinError<InvalidInput>(options).find("is not a directory"), std::string::npos);

  options.file_store_path = "";
  EXPECT_NE(JoinError<InvalidInput>(options).find("--file_store_path"), std::string::npos);

  options.file_store_path = directory.string();
  options.run_id = "";
  EXPECT_NE(JoinError<InvalidInput>(options).find("run id"), std::string::npos);
  options.run_id = "bad/channel65";  // its keys would be run "bad"'s
  EXPECT_EQ(JoinError<InvalidInput>(options), "--run_id 'bad/channel65': use no '/' and no spaces");

  options.run_id = "bad";
  options.num_shards = 2;
  options.shard_id = 2;
  EXPECT_NE(JoinError<InvalidInput>(options).find("--shard_id 2"), std::string::npos);
  options.shard_id = -1;
  EXPECT_NE(JoinError<InvalidInput>(options).find("--shard_id -1"), std::string::npos);
  options.num_shards = 0;
  options.shard_id = 0;
  EXPECT_NE(JoinError<InvalidInput>(options).find("--num_shards 0"), std::string::npos);
  fs::remove_all(directory);
}

}  // namespace
}  // namespace lockstep::testing
