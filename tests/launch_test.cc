// `lockstep launch`: whole jobs on 127.0.0.1 in which a shard is killed or stopped and the job finishes by
// itself with the checkpoint of an uninterrupted run, agents meet through both stores (also under Redis
// faults), and bad usage gets one line. The agent's pieces: launch_parts_test.cc.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/comm/redis_store.h"
#include "lockstep/core/enforce.h"
#include "lockstep/launch/agent.h"
#include "lockstep/launch/agent_store.h"
#include "lockstep/launch/shard_processes.h"
#include "lockstep/train/safetensors.h"
#include "processes.h"
#include "shards.h"
#include "test_util.h"

namespace lockstep::testing {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr seconds kJobLimit{120};  // a whole small job with a restart, on a shared, slow machine

// One-thread LeNet shards on loopback with batches of 8, checkpoints m_<epoch> and logs in `dir`, and a short
// --timeout so that a stalled shard is noticed quickly; `data` adds what the data and epochs are.
Args LeNetShard(const std::string& dir, const Args& data) {
  return Concat({"train", "--use_cpu", "--threads", "1", "--distributed_interfaces", "lo", "--model", "lenet",
                 "--batch_size", "8", "--save_model_name", "m", "--log_dir", dir, "--timeout", "3"},
                data);
}

// LeNet on Fashion-MNIST, 3 epochs of 100 steps of 3 x 8 images.
Args LeNetTraining(const std::string& dir) {
  return LeNetShard(dir, {"--train_data", "fashion-mnist", "--epoch_size", "2400", "--num_epochs", "3",
                          "--base_learning_rate", "0.1", "--momentum", "0.9"});
}

// LeNet on synthetic images, for jobs whose numbers do not matter.
Args NullTraining(const std::string& dir, int epochs) {
  return LeNetShard(dir, {"--train_data", "null", "--num_channels", "1", "--image_size", "28", "--num_labels",
                          "10", "--epoch_size", "1600", "--num_epochs", std::to_string(epochs)});
}

// `lockstep launch` with the store and checkpoints in `dir`, then `-- training`.
Args Launch(const std::string& dir, const Args& flags, const Args& training) {
  return Concat(
      Concat(Concat({CliPath(), "launch", "--monitor_interval", "0.2", "--rdzv", "file://" + dir}, flags),
             {"--"}),
      training);
}

// The pid of `shard` in the agent's line "round <round>: ... shard <shard> pid <pid>", once it printed it.
std::optional<pid_t> ShardPid(Process& agent, int round, int shard, milliseconds limit) {
  const std::regex line(fmt::format("round {}: run id .*[ ,]shard {} pid ([0-9]+)", round, shard));
  const auto deadline = Clock::now() + limit;
  while (true) {
    std::smatch match;
    const std::string output = agent.Output();
    if (std::regex_search(output, match, line)) return std::stoi(match[1]);
    if (Clock::now() >= deadline || agent.Wait(milliseconds(20))) return std::nullopt;
  }
}

bool WaitForFile(const std::string& path, Process& agent, milliseconds limit) {
  for (const auto deadline = Clock::now() + limit; !fs::exists(path);) {
    if (Clock::now() >= deadline || agent.Wait(milliseconds(0))) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

// True once no process has the pid (neither running nor a zombie), within a few seconds.
bool Gone(pid_t pid) {
  for (int i = 0; i < 250; ++i) {
    if (kill(pid, 0) != 0 && errno == ESRCH) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return false;
}

// Every tensor bitwise equal, and the same training position.
void ExpectSameCheckpoint(const std::string& actual_path, const std::string& expected_path) {
  SafetensorsFile actual = ReadSafetensors(actual_path), expected = ReadSafetensors(expected_path);
  for (const char* key : {"model", "seed", "epochs_done", "iteration", "reader_position", "images_trained"})
    EXPECT_EQ(actual.metadata[key], expected.metadata[key]) << key;
  ASSERT_EQ(actual.tensors.size(), expected.tensors.size());
  for (const auto& [name, want] : expected.tensors) {
    auto it = actual.tensors.find(name);
    ASSERT_NE(it, actual.tensors.end()) << name;
    ASSERT_EQ(it->second.nbytes(), want.nbytes()) << name;
    EXPECT_EQ(std::memcmp(it->second.raw_data(), want.raw_data(), want.nbytes()), 0) << name << " differs";
  }
}

// The one line of `output` that starts "lockstep: error: ".
std::string ErrorLine(const std::string& output) {
  std::istringstream in(output);
  std::string found;
  int count = 0;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("lockstep: error: ", 0) == 0) {
      found = line;
      ++count;
    }
  EXPECT_EQ(count, 1) << output;
  return found;
}

// An uninterrupted job's last checkpoint, made once for the tests that compare with it.
class LaunchedLeNet : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!HaveFashionMnist()) return;
    reference_ = new TempDirectory;
    Process agent(Launch(reference_->path(), {"--nproc_per_node", "3"}, LeNetTraining(reference_->path())),
                  *reference_ / "agent.out");
    const std::optional<int> code = agent.Wait(kJobLimit);
    if (!code || *code != 0) ADD_FAILURE() << "the uninterrupted job failed:\n" << agent.Output();
  }
  static void TearDownTestSuite() {
    delete reference_;
    reference_ = nullptr;
  }
  void SetUp() override {
    if (!HaveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }

  // A 3-shard job in which shard `victim` gets `signal` once the epoch-1 checkpoint exists: it must end by
  // itself with exit code 0 after a restart, leave no shard behind and match the uninterrupted job.
  void ExpectRecovers(int victim, int signal, const std::string& cause) {
    TempDirectory dir;
    Process agent(
        Launch(dir.path(), {"--nproc_per_node", "3", "--max_restarts", "3"}, LeNetTraining(dir.path())),
        dir / "agent.out");
    std::vector<pid_t> first_round;
    for (int shard = 0; shard < 3; ++shard) {
      std::optional<pid_t> pid = ShardPid(agent, 0, shard, kJobLimit);
      ASSERT_TRUE(pid) << agent.Output();
      first_round.push_back(*pid);
    }
    ASSERT_TRUE(WaitForFile(dir / "m_1.safetensors", agent, kJobLimit)) << agent.Output();
    kill(first_round[victim], signal);
    const std::optional<int> code = agent.Wait(kJobLimit);
    const std::string output = agent.Output();
    ASSERT_EQ(code, std::optional<int>(0)) << output;
    EXPECT_NE(output.find(cause), std::string::npos) << output;
    EXPECT_NE(output.find("round 1: run id"), std::string::npos) << "no restart:\n" << output;
    for (pid_t pid : first_round) EXPECT_TRUE(Gone(pid)) << "shard pid " << pid << " outlived its round";
    ExpectSameCheckpoint(dir / "m_3.safetensors", *reference_ / "m_3.safetensors");
  }

  static TempDirectory* reference_;
};

TempDirectory* LaunchedLeNet::reference_ = nullptr;

}  // namespace

TEST_F(LaunchedLeNet, KilledShardRestartsFromCheckpointAndMatchesUninterruptedJob) {
  ExpectRecovers(1, SIGKILL, "shard 1 was killed by SIGKILL");
}

TEST_F(LaunchedLeNet, StoppedShardRestartsFromCheckpointAndMatchesUninterruptedJob) {
  ExpectRecovers(2, SIGSTOP, "shard 2 sent nothing for 3 s");
}

TEST(Launch, RestartsSpentEndJobWithHistory) {
  TempDirectory dir;
  Process agent(
      Launch(dir.path(), {"--nproc_per_node", "2", "--max_restarts", "0"}, NullTraining(dir.path(), 50)),
      dir / "agent.out");
  std::optional<pid_t> victim = ShardPid(agent, 0, 1, kJobLimit);
  ASSERT_TRUE(victim) << agent.Output();
  ASSERT_TRUE(WaitForFile(dir / "m_1.safetensors", agent, kJobLimit)) << agent.Output();
  kill(*victim, SIGKILL);
  const std::optional<int> code = agent.Wait(kJobLimit);
  const std::string output = agent.Output();
  ASSERT_TRUE(code) << output;
  EXPECT_NE(*code, 0);
  EXPECT_TRUE(
      std::regex_search(output, std::regex("failure 1: round 0 \\(run id .*_r0\\): shard 1 was killed by "
                                           "SIGKILL after [0-9.]+ s")))
      << output;
  EXPECT_NE(ErrorLine(output).find("--max_restarts 0"), std::string::npos);
  EXPECT_EQ(output.find("round 1: run id"), std::string::npos) << output;
}

// A shard killed after the last epoch's checkpoint (here in the test pass) lost nothing: with no restart
// left the job is still complete.
TEST(Launch, FailureAfterTheLastCheckpointLeavesTheJobComplete) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDirectory dir;
  Process agent(Launch(dir.path(), {"--nproc_per_node", "2", "--max_restarts", "0"},
                       LeNetShard(dir.path(), {"--train_data", "fashion-mnist", "--test_data",
                                               "fashion-mnist", "--epoch_size", "800", "--num_epochs", "1"})),
                dir / "agent.out");
  std::optional<pid_t> victim = ShardPid(agent, 0, 1, kJobLimit);
  ASSERT_TRUE(victim) << agent.Output();
  ASSERT_TRUE(WaitForFile(dir / "m_1.safetensors", agent, kJobLimit)) << agent.Output();
  kill(*victim, SIGKILL);
  ASSERT_EQ(agent.Wait(kJobLimit), std::optional<int>(0)) << agent.Output();
  EXPECT_TRUE(std::regex_search(agent.Output(),
                                std::regex("round 0 \\(run id .*_r0\\): shard 1 was killed by SIGKILL after "
                                           "[0-9.]+ s; .*m_1.safetensors has all --num_epochs 1: the job is "
                                           "complete")))
      << agent.Output();
}

// A failure that repeats on every restart (a flag the shards refuse) ends the job at once, its line last.
TEST(Launch, FailureThatRepeatsStopsTheJobAtOnce) {
  TempDirectory dir;
  Process agent(Launch(dir.path(), {"--nproc_per_node", "2", "--max_restarts", "3"},
                       Concat(NullTraining(dir.path(), 2), {"--num_gpus", "3"})),
                dir / "agent.out");
  const std::optional<int> code = agent.Wait(kJobLimit);
  const std::string output = agent.Output();
  ASSERT_EQ(code, std::optional<int>(kExitNotRetryable)) << output;
  EXPECT_EQ(output.find("round 1: run id"), std::string::npos) << output;
  const std::string error = ErrorLine(output);
  EXPECT_NE(error.find("would fail the same way on a restart, so none was tried"), std::string::npos)
      << error;
  EXPECT_NE(error.find("does not divide evenly among 3 replicas"), std::string::npos) << error;
  EXPECT_EQ(output.substr(output.rfind('\n', output.size() - 2) + 1), error + "\n") << output;
}

// A job whose newest checkpoint has every epoch is done: launching it again ends at once, with success.
TEST(Launch, JobWithEveryEpochCheckpointedIsComplete) {
  TempDirectory dir;
  Process first(Launch(dir.path(), {"--nproc_per_node", "2"}, NullTraining(dir.path(), 1)),
                dir / "first.out");
  ASSERT_EQ(first.Wait(kJobLimit), std::optional<int>(0)) << first.Output();
  Process again(Launch(dir.path(), {"--nproc_per_node", "2"}, NullTraining(dir.path(), 1)),
                dir / "again.out");
  ASSERT_EQ(again.Wait(kJobLimit), std::optional<int>(0)) << again.Output();
  EXPECT_NE(again.Output().find("round 0: " + dir / "m_1.safetensors" +
                                " has all --num_epochs 1: the job is complete"),
            std::string::npos)
      << again.Output();
  EXPECT_EQ(again.Output().find("started"), std::string::npos) << "no shard should run:\n" << again.Output();
}

// A finished job launched again under its --job_id with more epochs trains them from its newest checkpoint;
// with as many, it is complete.
TEST(Launch, FinishedJobLaunchedAgainWithMoreEpochsTrainsThem) {
  TempDirectory dir;
  const Args flags = {"--nproc_per_node", "2", "--job_id", "more"};
  Process first(Launch(dir.path(), flags, NullTraining(dir.path(), 1)), dir / "first.out");
  ASSERT_EQ(first.Wait(kJobLimit), std::optional<int>(0)) << first.Output();
  Process more(Launch(dir.path(), flags, NullTraining(dir.path(), 2)), dir / "more.out");
  ASSERT_EQ(more.Wait(kJobLimit), std::optional<int>(0)) << more.Output();
  EXPECT_NE(more.Output().find("round 1: run id more_r1, 2 shards, batch 8 per shard, resuming from " +
                               dir / "m_1.safetensors"),
            std::string::npos)
      << more.Output();
  EXPECT_TRUE(fs::exists(dir / "m_2.safetensors")) << more.Output();
  Process again(Launch(dir.path(), flags, NullTraining(dir.path(), 2)), dir / "again.out");
  ASSERT_EQ(again.Wait(kJobLimit), std::optional<int>(0)) << again.Output();
  EXPECT_NE(again.Output().find("round 2: " + dir / "m_2.safetensors" +
                                " has all --num_epochs 2: the job is complete"),
            std::string::npos)
      << again.Output();
}

// Every line of a shard carries one prefix, the launcher's: the trainer leaves out its own "shard i: ".
TEST(Launch, ShardLinesCarryOnePrefix) {
  TempDirectory dir;
  Process agent(Launch(dir.path(), {"--nproc_per_node", "2"},
                       Concat(NullTraining(dir.path(), 1), {"--log_every_iters", "50"})),
                dir / "agent.out");
  ASSERT_EQ(agent.Wait(kJobLimit), std::optional<int>(0)) << agent.Output();
  const std::string output = agent.Output();
  for (int shard = 0; shard < 2; ++shard) {
    for (const std::string& line :
         {fmt::format("\n\\[shard {}\\] joined .* as shard {} of 2\n", shard, shard),
          fmt::format("\n\\[shard {}\\] epoch 1/1: ", shard),
          fmt::format("\n\\[shard {}\\] \\S+ epoch 1/1 iter 50/100: ", shard)})
      EXPECT_TRUE(std::regex_search(output, std::regex(line))) << line << " in\n" << output;
    EXPECT_EQ(output.find(fmt::format("[shard {}] shard", shard)), std::string::npos) << output;
  }
}

// An agent killed while its round runs and started again with the same --job_id (as a supervisor does) fails
// that round, whose shards died with it, and the job goes on from its newest checkpoint.
TEST(Launch, AgentStartedAgainRestartsTheJob) {
  TempDirectory dir;
  const Args flags = {"--nproc_per_node", "2", "--job_id", "again", "--max_restarts", "2"};
  Process first(Launch(dir.path(), flags, NullTraining(dir.path(), 3)), dir / "first.out");
  ASSERT_TRUE(WaitForFile(dir / "m_1.safetensors", first, kJobLimit)) << first.Output();
  first.Signal(SIGKILL);
  ASSERT_TRUE(first.Wait(seconds(10)));
  Process second(Launch(dir.path(), flags, NullTraining(dir.path(), 3)), dir / "second.out");
  ASSERT_EQ(second.Wait(kJobLimit), std::optional<int>(0)) << second.Output();
  EXPECT_TRUE(
      std::regex_search(second.Output(), std::regex("round 0 \\(run id again_r0\\): agent .* has exited")))
      << second.Output();
  EXPECT_NE(second.Output().find("round 1: run id again_r1"), std::string::npos) << second.Output();
  EXPECT_TRUE(fs::exists(dir / "m_3.safetensors"));
}

// Redis killed and started again, empty, while the job runs: the agent and the shards connect again and the
// job ends well.
TEST(Launch, RedisRestartedMidRunDoesNotEndTheJob) {
  if (!RedisServer::Available()) GTEST_SKIP() << "redis-server is not installed";
  TempDirectory dir;
  RedisServer redis;
  const Args launch = {CliPath(),
                       "launch",
                       "--monitor_interval",
                       "0.2",
                       "--rdzv",
                       fmt::format("redis://127.0.0.1:{}", redis.port()),
                       "--nproc_per_node",
                       "2",
                       "--"};
  Process agent(Concat(launch, Concat(NullTraining(dir.path(), 3), {"--file_store_path", dir.path()})),
                dir / "agent.out");
  ASSERT_TRUE(WaitForFile(dir / "m_1.safetensors", agent, kJobLimit)) << agent.Output();
  redis.Restart();
  ASSERT_EQ(agent.Wait(kJobLimit), std::optional<int>(0)) << agent.Output();
  EXPECT_NE(agent.Output().find("failed ("), std::string::npos) << agent.Output();
  EXPECT_NE(agent.Output().find("; connecting again for up to 60 s"), std::string::npos) << agent.Output();
  EXPECT_NE(agent.Output().find(fmt::format("Redis 127.0.0.1:{}: connected again", redis.port())),
            std::string::npos)
      << agent.Output();
  // The shards meet there too: they reconnect, end their run together and exit 0, with no restart.
  EXPECT_NE(agent.Output().find("round 0: shards 0-1 finished"), std::string::npos) << agent.Output();
  EXPECT_NE(agent.Output().find("finished in round 0; its last checkpoint: " + (dir / "m_3.safetensors")),
            std::string::npos)
      << agent.Output();
  EXPECT_EQ(agent.Output().find("round 1"), std::string::npos) << agent.Output();
  EXPECT_TRUE(fs::exists(dir / "m_3.safetensors"));
}

// Redis started again, empty, while an agent waits for another: its place is gone, it takes one again, and
// the round forms when the other comes.
TEST(Launch, RedisRestartedWhileAgentsMeetLosesNoAgent) {
  if (!RedisServer::Available()) GTEST_SKIP() << "redis-server is not installed";
  TempDirectory dir;
  RedisServer redis;
  const Args flags = {
      "--monitor_interval", "0.2", "--rdzv",   fmt::format("redis://127.0.0.1:{}", redis.port()),
      "--nnodes",           "2",   "--job_id", "wiped",
      "--join_timeout",     "60",  "--"};
  const Args training = Concat(NullTraining(dir.path(), 1), {"--file_store_path", dir.path()});
  auto agent = [&](const std::string& name) {
    return std::make_unique<Process>(Concat(Concat({CliPath(), "launch"}, flags), training), dir / name);
  };
  auto first = agent("first.out");
  RedisStore probe("127.0.0.1", redis.port(), "test");
  const auto deadline = std::chrono::steady_clock::now() + seconds(30);
  while (!probe.check({"lockstep_launch/wiped/round0.slot0"}) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(50));
  redis.Restart();
  auto second = agent("second.out");
  for (Process* p : {first.get(), second.get()})
    EXPECT_EQ(p->Wait(kJobLimit), std::optional<int>(0)) << p->Output();
  EXPECT_NE(first->Output().find("round 0: this agent's place in Redis 127.0.0.1:"), std::string::npos)
      << first->Output();
  EXPECT_NE(first->Output().find("round 0: run id wiped_r0, 2 shards"), std::string::npos) << first->Output();
}

// Two agents with one shard each meet through `rdzv`; a killed shard restarts both agents' shards.
void ExpectTwoAgentsRestartTogether(const std::string& rdzv) {
  TempDirectory dir;
  const Args flags = {"--monitor_interval", "0.2", "--rdzv",         rdzv, "--nnodes", "2",
                      "--job_id",           "two", "--max_restarts", "2",  "--"};
  const Args training = Concat(NullTraining(dir.path(), 4), {"--file_store_path", dir.path()});
  auto agent = [&](const std::string& name) {
    return std::make_unique<Process>(Concat(Concat({CliPath(), "launch"}, flags), training), dir / name);
  };
  auto first = agent("first.out"), second = agent("second.out");
  ASSERT_TRUE(WaitForFile(dir / "m_1.safetensors", *first, kJobLimit)) << first->Output();
  // Shard 1 runs under one of the agents; the other agent's shard must be restarted too.
  Process* owner = ShardPid(*first, 0, 1, milliseconds(0)) ? first.get() : second.get();
  std::optional<pid_t> victim = ShardPid(*owner, 0, 1, seconds(5));
  ASSERT_TRUE(victim);
  kill(*victim, SIGKILL);
  for (Process* p : {first.get(), second.get()}) {
    EXPECT_EQ(p->Wait(kJobLimit), std::optional<int>(0)) << p->Output();
    EXPECT_NE(p->Output().find("round 1: run id two_r1, 2 shards"), std::string::npos) << p->Output();
  }
  EXPECT_TRUE(fs::exists(dir / "m_4.safetensors"));
}

// An agent waiting for others says so after 10 s, and gives up after --join_timeout with one line.
TEST(Launch, LoneAgentSaysItWaitsAndTimesOut) {
  TempDirectory dir;
  Process agent(Launch(dir.path(), {"--nnodes", "2", "--job_id", "alone", "--join_timeout", "11"},
                       Concat(NullTraining(dir.path(), 1), {"--file_store_path", dir.path()})),
                dir / "agent.out");
  EXPECT_EQ(agent.Wait(seconds(60)), std::optional<int>(1)) << agent.Output();
  EXPECT_NE(agent.Output().find("round 0: 1 of at least 2 agents joined job 'alone' in file store "),
            std::string::npos)
      << agent.Output();
  EXPECT_NE(agent.Output().find("after 10 s; waiting up to --join_timeout 11 s"), std::string::npos)
      << agent.Output();
  EXPECT_NE(ErrorLine(agent.Output()).find("within 11 s; start an agent on each machine"), std::string::npos);
}

// Agents whose flags differ would train on the first one's (its global batch) or wait on each other without
// end (--nnodes 2 beside --nnodes 1): the round fails at once, naming the flag, and no restart is tried.
TEST(Launch, AgentsWithOtherFlagsAreRefusedNamingTheFlag) {
  TempDirectory dir;
  const Args training = Concat(NullTraining(dir.path(), 1), {"--file_store_path", dir.path()});
  auto agent = [&](const std::string& job, const std::string& name, const std::string& nodes,
                   const Args& more) {
    return std::make_unique<Process>(
        Concat(Launch(dir.path(), {"--nnodes", nodes, "--job_id", job}, training), more),
        dir / (job + name + ".out"));
  };
  for (const auto& [job, second_nodes, more, expected] :
       std::vector<std::tuple<std::string, std::string, Args, std::string>>{
           {"batch", "2", {"--batch_size", "16"}, "has `--batch_size 16` where agent "},
           {"nodes", "1", {}, "has `--nnodes 1:1` where agent "}}) {
    auto first = agent(job, "a", "2", {});
    ASSERT_TRUE(WaitForFile(dir / ("lockstep_launch_" + job + "/round0.flags"), *first, seconds(30)));
    auto second = agent(job, "b", second_nodes, more);
    for (Process* p : {first.get(), second.get()}) {
      EXPECT_EQ(p->Wait(seconds(60)), std::optional<int>(kExitNotRetryable)) << p->Output();
      const std::string error = ErrorLine(p->Output());
      EXPECT_NE(error.find("would fail the same way on a restart, so none was tried"), std::string::npos)
          << error;
      EXPECT_NE(error.find(expected), std::string::npos) << error;
    }
  }
}

TEST(Launch, TwoAgentsRestartTogetherThroughFileStore) {
  TempDirectory store;
  ExpectTwoAgentsRestartTogether("file://" + store.path());
}

TEST(Launch, TwoAgentsRestartTogetherThroughRedis) {
  if (!RedisServer::Available()) GTEST_SKIP() << "redis-server is not installed";
  RedisServer redis;
  ExpectTwoAgentsRestartTogether(fmt::format("redis://127.0.0.1:{}", redis.port()));
}

// mpirun starts one agent per "machine"; the agents take their order, count and job id from it, and their
// shards do not mistake mpirun's variables for their own.
TEST(Launch, AgentsStartedByMpirunRestartTogether) {
  const char* mpirun = "/usr/bin/mpirun";
  if (access(mpirun, X_OK) != 0) GTEST_SKIP() << "mpirun is not installed";
  TempDirectory dir;
  Process agents(Concat({mpirun, "-np", "2", "--oversubscribe"},
                        Launch(dir.path(), {"--max_restarts", "1"}, NullTraining(dir.path(), 4))),
                 dir / "mpirun.out", {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"});
  std::optional<pid_t> victim = ShardPid(agents, 0, 1, kJobLimit);
  ASSERT_TRUE(victim) << agents.Output();
  ASSERT_TRUE(WaitForFile(dir / "m_1.safetensors", agents, kJobLimit)) << agents.Output();
  kill(*victim, SIGKILL);
  EXPECT_EQ(agents.Wait(kJobLimit), std::optional<int>(0)) << agents.Output();
  const std::string output = agents.Output();
  for (int shard = 0; shard < 2; ++shard)
    EXPECT_TRUE(std::regex_search(
        output, std::regex(fmt::format("round 1: run id .*_r1, 2 shards.* shard {} pid", shard))))
        << output;
  EXPECT_TRUE(fs::exists(dir / "m_4.safetensors"));
}

// An agent that comes while a round runs waits for the next one, which then has more shards with the same
// global batch: 2 shards x 8 images, then 4 x 4.
TEST(Launch, LaterAgentJoinsNextRoundWithSameGlobalBatch) {
  TempDirectory dir;
  auto agent = [&](const std::string& name) {
    return std::make_unique<Process>(
        Launch(dir.path(),
               {"--nnodes", "1:2", "--join_grace", "0.5", "--job_id", "grow", "--nproc_per_node", "2"},
               NullTraining(dir.path(), 4)),
        dir / name);
  };
  auto first = agent("first.out");
  std::optional<pid_t> victim = ShardPid(*first, 0, 1, kJobLimit);
  ASSERT_TRUE(victim) << first->Output();
  auto second = agent("second.out");
  for (auto until = Clock::now() + kJobLimit;
       second->Output().find("formed without this agent") == std::string::npos;) {
    ASSERT_LT(Clock::now(), until) << second->Output();
    std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_TRUE(WaitForFile(dir / "m_1.safetensors", *first, kJobLimit)) << first->Output();
  kill(*victim, SIGKILL);
  for (Process* p : {first.get(), second.get()}) {
    EXPECT_EQ(p->Wait(kJobLimit), std::optional<int>(0)) << p->Output();
    EXPECT_NE(p->Output().find("round 1: run id grow_r1, 4 shards, batch 4 per shard"), std::string::npos)
        << p->Output();
  }
  auto metadata = ReadSafetensors(dir / "m_4.safetensors").metadata;
  EXPECT_EQ(metadata["images_trained"], "6400");
  // A shard's own count goes on from round 0's: half the images up to the checkpoint, then a quarter.
  std::smatch resumed;
  const std::string output = first->Output();
  ASSERT_TRUE(std::regex_search(output, resumed, std::regex("round 1: .*resuming from ([^ ;]+);"))) << output;
  const int before = std::stoi(ReadSafetensors(resumed[1].str()).metadata["images_trained"]);
  EXPECT_EQ(metadata["shard_images_trained"], std::to_string(before / 2 + (6400 - before) / 4));
}

TEST(Launch, StoppedAgentStopsItsShards) {
  TempDirectory dir;
  Process agent(Launch(dir.path(), {"--nproc_per_node", "2"}, NullTraining(dir.path(), 1000)),
                dir / "agent.out");
  std::vector<pid_t> pids;
  for (int shard = 0; shard < 2; ++shard) {
    std::optional<pid_t> pid = ShardPid(agent, 0, shard, kJobLimit);
    ASSERT_TRUE(pid) << agent.Output();
    pids.push_back(*pid);
  }
  ASSERT_TRUE(WaitForFile(dir / "m_1.safetensors", agent, kJobLimit)) << agent.Output();  // training runs
  kill(pids[0], SIGSTOP);  // a stopped shard must end too
  agent.Signal(SIGTERM);
  EXPECT_EQ(agent.Wait(seconds(60)), std::optional<int>(128 + SIGTERM)) << agent.Output();
  for (pid_t pid : pids) EXPECT_TRUE(Gone(pid)) << "shard pid " << pid << " outlived its agent";
  // Every shard lived, so they stopped together after one step, and shard 0 saved it.
  const std::string output = agent.Output();
  EXPECT_NE(output.find("stopping shards 0-1: they finish the step and shard 0 saves a checkpoint; SIGKILL "
                        "in 30 s (--stop_grace)"),
            std::string::npos)
      << output;
  std::smatch saved;
  ASSERT_TRUE(std::regex_search(
      output, saved,
      std::regex("\\[shard 0\\] lockstep: stopped by SIGTERM (after step [0-9]+ of 100 "
                 "in epoch [0-9]+ of 1000); saved ([^:]+): resume with lockstep launch \\(its next round, "
                 "or the same command run again\\)\n")))
      << output;
  EXPECT_NE(output.find("[shard 1] lockstep: stopped by SIGTERM " + saved[1].str() + "; shard 0 saved " +
                        saved[2].str()),
            std::string::npos)
      << output;
  EXPECT_TRUE(fs::exists(saved[2].str())) << output;
}

TEST(LaunchInput, BadUsageGetsOneLine) {
  TempDirectory dir;
  const std::string training = "train --model lenet --train_data null --save_model_name m";
  struct Case {
    std::string arguments, expected;
  } cases[] = {
      {"launch -- " + training, "--rdzv is required"},
      {"launch --rdzv file://" + dir.path() + " " + training, "give the training command after `--`"},
      {"launch --rdzv file://" + dir.path() + " -- train --model lenet", "need --save_model_name"},
      {"launch --rdzv file://" + dir.path() + " -- " + training + " --num_shards 2", "drop --num_shards"},
      {"launch --rdzv file://" + dir.path() + " -- " + training + " --modle x",
       "in the training arguments after `-- train`: unknown flag --modle; did you mean --model?"},
      {"launch --rdzv file://" + dir.path() + " -- " + training + " --batch_size 0",
       "in the training arguments after `-- train`: --batch_size must be at least 1, got 0"},
      {"launch --rdzv file://" + dir.path() + " --nnodes 2 -- " + training, "--job_id is required"},
      {"launch --rdzv file://" + dir / "missing" + " -- " + training, "no such directory"},
      {"launch --nproc_per_node 0 --rdzv file://" + dir.path() + " -- " + training,
       "--nproc_per_node: must be at least 1, got 0"},
      {"launch --monitor_interval 0.001 --rdzv file://" + dir.path() + " -- " + training,
       "--monitor_interval: must be at least 0.01, got 0.001"},
      {"make-db --threads -1 --output " + dir / "db", "--threads: must be at least 0, got -1"},
  };
  for (const Case& c : cases) {
    CliOutput result = RunCliWithFiles(dir.path(), c.arguments);
    EXPECT_EQ(result.code, kExitNotRetryable) << c.arguments;
    EXPECT_NE(ErrorLine(result.err).find(c.expected), std::string::npos) << c.arguments << ":\n"
                                                                         << result.err;
  }
}

}  // namespace lockstep::testing
