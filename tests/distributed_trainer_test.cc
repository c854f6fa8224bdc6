// `lockstep train` as processes meeting on 127.0.0.1: shards match one process, a killed or stalled shard
// ends the run naming it, Ctrl-C on one shard stops all after the same step, a resumed run matches an
// uninterrupted one, and bad input gets one line.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "lockstep/comm/rendezvous.h"
#include "lockstep/train/safetensors.h"
#include "processes.h"
#include "shard_runs.h"
#include "shards.h"
#include "test_util.h"

namespace lockstep::testing {

namespace fs = std::filesystem;

namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Bounds on waits, generous for a shared, slow machine: a whole small run, and a run that stops on bad input.
constexpr seconds kRunLimit{180};
constexpr seconds kErrorLimit{60};
const char* kMpirun = "/usr/bin/mpirun";
const Args kMpirunEnvironment = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};

// 20 steps on `num_shards` shards x 2 devices and on one process with as many devices, with the same global
// batches: shard 0's checkpoint matches the single process's. (The reference has the same replicas because
// LeNet's first 20 steps can amplify the rounding of another per-device batch split to ~1e-3: a ReLU near its
// kink flips. Only the order of the gradient sums differs here.) Returns the comparison, checked against
// `tolerance`.
Comparison ExpectShardsMatchOneProcess(int num_shards, const Args& rendezvous_flags, const std::string& store,
                                       double tolerance = 1e-5) {
  constexpr int kBatchPerDevice = 4, kDevices = 2, kSteps = 20;
  const int shard_batch = kBatchPerDevice * kDevices, global_batch = shard_batch * num_shards;
  const int64_t epoch_size = int64_t{kSteps} * global_batch;
  TempDirectory one_dir, shards_dir;
  Processes run;
  run.Start(Train(Concat(LeNet(one_dir.path(), global_batch, epoch_size, 1),
                         {"--num_gpus", std::to_string(kDevices * num_shards)})),
            one_dir / "one_process.out");
  Args flags = Concat(LeNet(shards_dir.path(), shard_batch, epoch_size, 1),
                      {"--num_gpus", std::to_string(kDevices), "--run_id", UniqueName("equivalence")});
  StartShards(&run, Concat(flags, rendezvous_flags), num_shards, shards_dir / "run");
  if (!ExpectAllSucceed(run, kRunLimit)) return {};
  Comparison c = CompareCheckpoints(shards_dir / "m_1.safetensors", one_dir / "m_1.safetensors");
  std::cout << fmt::format(
      "{} shards x {} devices through {} vs 1 process with as many devices, global batch {}: "
      "largest relative L2 difference {:.3g} ({}){}\n",
      num_shards, kDevices, store, global_batch, c.largest_relative, c.worst_tensor,
      c.bitwise ? ", bitwise equal" : "");
  EXPECT_LE(c.largest_relative, tolerance) << c.worst_tensor;
  return c;
}

}  // namespace

TEST(DistributedTrainer, ShardsMatchOneProcessThroughFileStore) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  ExpectShardsMatchOneProcess(2, {}, "the file store");
  ExpectShardsMatchOneProcess(3, {}, "the file store");
}

// The memory plan moves blobs between buffers, never a value: 2 shards x 2 devices train to the same bits
// with shared buffers (the default) and with a buffer per blob (`model_flags`: the run's flags, its one epoch
// saving m_1.safetensors in `dir`).
void ExpectSharedBuffersGiveTheSameBits(const std::function<Args(const std::string& dir)>& model_flags) {
  constexpr int kShards = 2;
  TempDirectory shared_dir, unshared_dir;
  Processes run;
  for (auto [dir, extra] :
       {std::pair{&shared_dir, Args{}}, std::pair{&unshared_dir, Args{"--share_buffers=false"}}}) {
    Args flags = Concat(model_flags(dir->path()), {"--num_gpus", "2", "--run_id", UniqueName("memory_plan")});
    StartShards(&run, Concat(flags, extra), kShards, *dir / "run");
  }
  if (!ExpectAllSucceed(run, kRunLimit)) return;
  Comparison c = CompareCheckpoints(shared_dir / "m_1.safetensors", unshared_dir / "m_1.safetensors");
  EXPECT_TRUE(c.bitwise) << c.worst_tensor << ": relative difference " << c.largest_relative;
}

TEST(DistributedTrainer, SharedBuffersGiveTheSameBits) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  ExpectSharedBuffersGiveTheSameBits([](const std::string& dir) { return LeNet(dir, 8, 10 * 8 * 2, 1); });
}

// ResNet-18, whose batch normalization the plan recomputes in the backward pass (parallel/recompute.h).
TEST(DistributedTrainer, SharedBuffersGiveTheSameBitsForResNet18) {
  ExpectSharedBuffersGiveTheSameBits([](const std::string& dir) {
    return Flags({{"--model", "resnet18"},
                  {"--train_data", "null"},
                  {"--image_size", "32"},
                  {"--num_labels", "10"},
                  {"--batch_size", "8"},
                  {"--epoch_size", std::to_string(3 * 8 * 2)},
                  {"--save_model_name", "m"},
                  {"--file_store_path", dir},
                  {"--log_dir", dir}});
  });
}

// Small buckets on three channels, the last one small: the same sums as one channel, so the same bits, and
// the same result as one process.
TEST(DistributedTrainer, ChannelsAndATailBucketKeepTheResult) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const Args buckets{"--allreduce_bucket_mb", "0.05", "--allreduce_tail_bucket_mb", "0.01"};
  ExpectShardsMatchOneProcess(3, Concat(buckets, {"--allreduce_channels", "3"}),
                              "the file store, 3 channels");
  TempDirectory one_channel, three_channels;
  Processes run;
  auto start = [&](const TempDirectory& dir, const std::string& channels) {
    StartShards(&run,
                Concat(Concat(LeNet(dir.path(), 8, 8 * 3 * 10, 1), buckets),
                       {"--allreduce_channels", channels, "--run_id", UniqueName("channels")}),
                3, dir / "run");
  };
  start(one_channel, "1");
  start(three_channels, "3");
  if (!ExpectAllSucceed(run, kRunLimit)) return;
  Comparison c = CompareCheckpoints(three_channels / "m_1.safetensors", one_channel / "m_1.safetensors");
  EXPECT_TRUE(c.bitwise) << c.worst_tensor << " differs by " << c.largest_relative;
  // Each shard says how its gradients travel.
  const std::string output = ReadFile(three_channels / "run_shard2.out");
  EXPECT_NE(output.find("gradients across shards: "), std::string::npos) << output;
  EXPECT_NE(output.find(" on 3 channels with ring_chunked"), std::string::npos) << output;  // auto, 3 shards
  EXPECT_NE(output.find("\nshard 2: epoch 1/1: "), std::string::npos)
      << "shards mark their lines: " << output;
}

// Gradients sent in 16 bits: each step's sums are within the wire's bound of float32's (k u sum|x|, checked
// per element in gloo_communicator_test.cc), but 20 LeNet steps carry that through the training's own
// sensitivity (a ReLU near its kink flips): measured, the worst tensor is a small bias's momentum, where the
// gradient sums cancel, at 0.12 (bfloat16, 2 shards) and 0.28 (3 shards) relative L2, float16 0.008 and 0.12.
// The run must still train the same model: every tensor within 0.5, and never float32's bits.
TEST(DistributedTrainer, SixteenBitWireShardsStayCloseToOneProcess) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  for (const std::string wire : {"bfloat16", "float16"})
    for (int shards : {2, 3}) {
      Comparison c = ExpectShardsMatchOneProcess(shards, {"--allreduce_dtype", wire},
                                                 "the file store, a " + wire + " wire", 0.5);
      EXPECT_GT(c.largest_relative, 0) << "the wire rounds: the result cannot be float32's bits";
    }
}

TEST(DistributedTrainer, ShardsMatchOneProcessThroughRedis) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  if (!RedisServer::Available()) GTEST_SKIP() << "redis-server is not installed";
  RedisServer redis;
  const Args flags = {"--redis_host", "127.0.0.1", "--redis_port", std::to_string(redis.port())};
  ExpectShardsMatchOneProcess(2, flags, "Redis");
  ExpectShardsMatchOneProcess(3, flags, "Redis");
}

// --combine_spatial_bn normalizes with the whole job's batch: 2 shards of 1 device train ResNet-18 as one
// process of 2 devices does, to the bit. (Had each shard normalized its own half, the parameters would differ
// by a relative 2.4 after these 4 steps: conv1_bn_b.)
TEST(DistributedTrainer, CombinedBatchNormShardsMatchOneProcess) {
  constexpr int kShards = 2, kBatchPerDevice = 4, kSteps = 4;
  auto resnet18 = [](const TempDirectory& dir, int batch_size) {
    return Concat(Flags({{"--model", "resnet18"},
                         {"--train_data", "null"},
                         {"--image_size", "32"},
                         {"--num_labels", "10"},
                         {"--batch_size", std::to_string(batch_size)},
                         {"--epoch_size", std::to_string(kSteps * kBatchPerDevice * kShards)},
                         {"--save_model_name", "m"},
                         {"--file_store_path", dir.path()},
                         {"--log_dir", dir.path()}}),
                  {"--combine_spatial_bn"});
  };
  TempDirectory one_dir, shards_dir;
  Processes run;
  run.Start(
      Train(Concat(resnet18(one_dir, kBatchPerDevice * kShards), {"--num_gpus", std::to_string(kShards)})),
      one_dir / "one_process.out");
  StartShards(
      &run,
      Concat(resnet18(shards_dir, kBatchPerDevice), {"--num_gpus", "1", "--run_id", UniqueName("sync_bn")}),
      kShards, shards_dir / "run");
  if (!ExpectAllSucceed(run, kRunLimit)) return;
  Comparison c = CompareCheckpoints(shards_dir / "m_1.safetensors", one_dir / "m_1.safetensors");
  EXPECT_TRUE(c.bitwise) << c.worst_tensor << " differs by a relative " << c.largest_relative;
}

TEST(DistributedTrainer, KilledShardEndsRunAndResumedRunMatchesUninterruptedOne) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  // 384 steps an epoch, a second or more even on a fast machine: a kill 100 ms after the first checkpoint
  // lands inside epoch 2.
  constexpr int kBatch = 16, kEpochs = 3, kTimeout = 5;
  constexpr int64_t kEpochSize = 12288;
  TempDirectory full_dir, killed_dir, resumed_dir;
  auto flags = [&](const TempDirectory& dir) {
    return Concat(LeNet(dir.path(), kBatch, kEpochSize, kEpochs),
                  {"--timeout", std::to_string(kTimeout), "--run_id", UniqueName("resume")});
  };

  Processes full;
  StartShards(&full, flags(full_dir), 2, full_dir / "run");
  ASSERT_TRUE(ExpectAllSucceed(full, kRunLimit));

  Processes killed;
  StartShards(&killed, flags(killed_dir), 2, killed_dir / "run");
  ASSERT_TRUE(WaitForFile(killed_dir / "m_1.safetensors", killed, kRunLimit)) << "no checkpoint of epoch 1";
  std::this_thread::sleep_for(milliseconds(100));
  killed[1].Signal(SIGKILL);
  const auto kill_time = Clock::now();
  std::optional<int> code = killed[0].Wait(seconds(kTimeout + 5));
  const double seconds_to_exit = SecondsSince(kill_time);
  ASSERT_TRUE(code) << "shard 0 still runs " << kTimeout + 5 << " s after shard 1 was killed";
  EXPECT_NE(*code, 0);
  std::string line = ErrorLine(killed[0].Output());
  EXPECT_NE(line.find("shard 1"), std::string::npos) << line;
  EXPECT_NE(line.find("Allreduce"), std::string::npos) << line;
  EXPECT_FALSE(fs::exists(killed_dir / "m_2.safetensors")) << "the kill came after epoch 2";
  EXPECT_EQ(killed[1].Wait(seconds(10)), std::optional<int>(128 + SIGKILL));
  std::cout << fmt::format("shard 0 exited {:.2f} s after shard 1 was killed: {}\n", seconds_to_exit, line);

  Processes resumed;
  StartShards(&resumed, Concat(flags(resumed_dir), {"--load_model_path", killed_dir / "m_1.safetensors"}), 2,
              resumed_dir / "run");
  if (!ExpectAllSucceed(resumed, kRunLimit)) return;
  Comparison c = CompareCheckpoints(resumed_dir / "m_3.safetensors", full_dir / "m_3.safetensors");
  std::cout << fmt::format("resumed vs uninterrupted epoch-3 checkpoint: {}\n",
                           c.bitwise ? std::string("bitwise equal")
                                     : fmt::format("largest relative L2 difference {:.3g} ({})",
                                                   c.largest_relative, c.worst_tensor));
  EXPECT_LE(c.largest_relative, 1e-6) << c.worst_tensor;
}

// Ctrl-C on one shard stops every shard after the same step: the shards agree between two steps, shard 0
// saves a checkpoint of that step, and each exits 130 naming it.
TEST(DistributedTrainer, SigintOnOneShardStopsEveryShardAfterTheSameStep) {
  TempDirectory dir;
  Processes run;
  StartShards(&run,
              Concat(NullData(dir.path(), 8000000, 2),
                     {"--save_model_name", "m", "--log_every_iters", "1", "--run_id", UniqueName("sigint")}),
              2, dir / "run");
  const auto deadline = Clock::now() + kRunLimit;
  while (run[1].Output().find(" iter 1/") == std::string::npos) {  // the first step is done
    ASSERT_LT(Clock::now(), deadline) << run[1].Output();
    ASSERT_FALSE(run[1].Wait(milliseconds(0))) << run[1].Output();
    std::this_thread::sleep_for(milliseconds(20));
  }
  run[1].Signal(SIGINT);
  const std::regex stopped(
      "\nlockstep: stopped by SIGINT \\(Ctrl-C\\) after step ([0-9]+) of ([0-9]+) in epoch 1 of 2; (shard 0 "
      ")?"
      "saved (.*/m_iter0*([0-9]+)\\.safetensors): resume with --load_model_path latest\n$");
  std::smatch said[2];
  std::string printed[2];
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(run[k].Wait(kRunLimit), std::optional<int>(130)) << run[k].Output();
    printed[k] = run[k].Output();
    ASSERT_TRUE(std::regex_search(printed[k], said[k], stopped)) << printed[k];
    EXPECT_EQ(said[k][3].matched, k == 1) << printed[k];
  }
  EXPECT_EQ(said[0][1], said[1][1]) << "both shards stop after the same step";
  EXPECT_EQ(said[0][4], said[1][4]) << "and name the same checkpoint";
  EXPECT_EQ(said[0][1], said[0][5]) << "the first epoch's steps are the job's iterations";
  EXPECT_EQ(ReadSafetensors(said[0][4]).metadata["iteration"], std::string(said[0][1]));
}

TEST(DistributedTrainer, StalledShardEndsRunNamingIt) {
  constexpr int kTimeout = 3;
  TempDirectory dir;
  // Epochs of 30 steps, checkpointed; far more epochs than the run lasts once shard 2 stops.
  Args flags = Concat(NullData(dir.path(), 30 * 8 * 3, 100),
                      {"--save_model_name", "m", "--timeout", std::to_string(kTimeout),
                       "--first_iter_timeout", "60", "--run_id", UniqueName("stall")});
  Processes run;
  StartShards(&run, flags, 3, dir / "run");
  ASSERT_TRUE(WaitForFile(dir / "m_1.safetensors", run, kRunLimit)) << "no checkpoint of epoch 1";
  run[2].Signal(SIGSTOP);
  const auto stop_time = Clock::now();
  const auto deadline = stop_time + seconds(kTimeout + 5);
  for (int k = 0; k < 2; ++k) {
    ExpectError(run[k], deadline, {"shard 2"});
    std::cout << fmt::format("shard {} exited {:.2f} s after shard 2 was stopped: {}\n", k,
                             SecondsSince(stop_time), ErrorLine(run[k].Output()));
  }
  run[2].Signal(SIGKILL);
  EXPECT_EQ(run[2].Wait(seconds(10)), std::optional<int>(128 + SIGKILL));
}

TEST(DistributedTrainerInput, MismatchedModelsStopEveryShard) {
  TempDirectory dir;
  Args flags =
      Concat(NullData(dir.path(), 16, 1), {"--first_iter_timeout", "30", "--run_id", UniqueName("mismatch")});
  Processes run;
  run.Start(Train(Concat(flags, {"--num_shards", "2", "--shard_id", "0"})), dir / "shard0.out");
  run.Start(Train(Concat(flags, {"--num_shards", "2", "--shard_id", "1", "--num_labels", "12"})),
            dir / "shard1.out");
  const auto deadline = Clock::now() + kErrorLimit;
  for (int k = 0; k < 2; ++k) ExpectError(run[k], deadline, {"differ", "parameter"});
}

TEST(DistributedTrainerInput, ShardsStartingFromDifferentCheckpointsStopEveryShard) {
  TempDirectory dir;
  Processes first;
  first.Start(Train(Concat(NullData(dir.path(), 16, 2), {"--save_model_name", "m"})), dir / "first.out");
  ASSERT_TRUE(ExpectAllSucceed(first, kRunLimit));
  Args flags = Concat(NullData(dir.path(), 16, 3), {"--first_iter_timeout", "30", "--run_id",
                                                    UniqueName("checkpoints"), "--num_shards", "2"});
  Processes run;
  run.Start(Train(Concat(flags, {"--shard_id", "0", "--load_model_path", dir / "m_1.safetensors"})),
            dir / "shard0.out");
  run.Start(Train(Concat(flags, {"--shard_id", "1", "--load_model_path", dir / "m_2.safetensors"})),
            dir / "shard1.out");
  const auto deadline = Clock::now() + kErrorLimit;
  for (int k = 0; k < 2; ++k)
    ExpectError(run[k], deadline, {"differ", "the starting point is the checkpoint of iteration"});
}

TEST(DistributedTrainerInput, ShardIdOutOfRange) {
  TempDirectory dir;
  Processes run;
  run.Start(Train(Concat(NullData(dir.path(), 16, 1),
                         {"--num_shards", "2", "--shard_id", "2", "--run_id", UniqueName("range")})),
            dir / "out");
  ExpectError(run[0], Clock::now() + kErrorLimit, {"--shard_id"});
}

TEST(DistributedTrainerInput, DuplicateShardIds) {
  constexpr int kFirstIterTimeout = 3;
  TempDirectory dir;
  const std::string store = dir / "store";
  fs::create_directories(store);
  Args flags = Concat(NullData(store, 16, 1), {"--log_dir", dir.path(), "--num_shards", "2", "--shard_id",
                                               "0", "--first_iter_timeout", std::to_string(kFirstIterTimeout),
                                               "--run_id", UniqueName("duplicate")});
  Processes run;
  const auto first_start = Clock::now();
  run.Start(Train(flags), dir / "first.out");
  // The second starts once the first has claimed shard 0: the store's first key.
  auto claimed = [&] {
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(fs::path(store) / kRendezvousKeysFolder, error))
      if (entry.path().filename().string()[0] != '.') return true;
    return false;
  };
  for (auto until = Clock::now() + kErrorLimit; !claimed() && Clock::now() < until;)
    if (run[0].Wait(milliseconds(10))) break;  // it ended: the assertion below reports it
  ASSERT_TRUE(claimed()) << "the first process never claimed shard 0";
  run.Start(Train(flags), dir / "second.out");
  ExpectError(run[1], Clock::now() + kErrorLimit, {"already held"});
  ExpectError(run[0], first_start + seconds(kFirstIterTimeout + 5), {"did not join"});
}

TEST(DistributedTrainerInput, UnreachableRedis) {
  TempDirectory dir;
  Processes run;
  run.Start(Train(Concat(NullData(dir.path(), 16, 1),
                         {"--num_shards", "2", "--shard_id", "0", "--run_id", UniqueName("no_redis"),
                          "--redis_host", "127.0.0.1", "--redis_port", std::to_string(FreeLoopbackPort())})),
            dir / "out");
  ExpectError(run[0], Clock::now() + kErrorLimit, {"cannot reach Redis"});
}

TEST(DistributedTrainerInput, RunIdReusedAfterFinishedRun) {
  TempDirectory dir;
  Args flags =
      Concat(NullData(dir.path(), 16, 1), {"--first_iter_timeout", "30", "--run_id", UniqueName("reuse")});
  Processes finished;
  StartShards(&finished, flags, 2, dir / "finished");
  ASSERT_TRUE(ExpectAllSucceed(finished, kRunLimit));
  Processes again;
  StartShards(&again, flags, 2, dir / "again");
  const auto deadline = Clock::now() + kErrorLimit;
  for (int k = 0; k < 2; ++k) ExpectError(again[k], deadline, {"fresh --run_id"});
}

TEST(DistributedTrainerInput, RunIdRequiredWithManyShards) {
  TempDirectory dir;
  Processes run;
  run.Start(Train(Concat(NullData(dir.path(), 16, 1), {"--num_shards", "2", "--shard_id", "0"})),
            dir / "out");
  ExpectError(run[0], Clock::now() + kErrorLimit, {"--run_id is required"});
}

TEST(DistributedTrainerInput, CtrlCWhileWaitingForTheOtherShardsEndsTheWait) {
  TempDirectory dir;
  const std::string run_id = UniqueName("alone");
  Processes run;
  run.Start(Train(Concat(NullData(dir.path(), 16, 1), {"--num_shards", "2", "--shard_id", "0", "--run_id",
                                                       run_id, "--save_model_name", "m"})),
            dir / "out");
  const auto deadline = Clock::now() + kErrorLimit;
  while (run[0].Output().find("lockstep ") == std::string::npos) {  // its stop guard is in place
    ASSERT_LT(Clock::now(), deadline) << run[0].Output();
    std::this_thread::sleep_for(milliseconds(20));
  }
  run[0].Signal(SIGINT);  // shard 1 never comes: without the stop, the wait lasts --first_iter_timeout
  EXPECT_EQ(run[0].Wait(kErrorLimit), std::optional<int>(130)) << run[0].Output();
  EXPECT_NE(run[0].Output().find("\nlockstep: stopped by SIGINT (Ctrl-C) while shard 0 waited for shard 1 to "
                                 "join run '" +
                                 run_id + "' in file store " + dir.path() + ", before training\n"),
            std::string::npos)
      << run[0].Output();
  // It gave its place back: the same command runs again, with shard 1 this time.
  Processes again;
  StartShards(&again, Concat(NullData(dir.path(), 16, 1), {"--first_iter_timeout", "30", "--run_id", run_id}),
              2, dir / "again");
  EXPECT_TRUE(ExpectAllSucceed(again, kRunLimit));
}

TEST(DistributedTrainer, MpirunShardsMatchHandStartedShards) {
  if (access(kMpirun, X_OK) != 0) GTEST_SKIP() << "mpirun is not installed";
  if (!HaveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDirectory mpirun_dir, hand_dir;
  constexpr int kBatch = 8, kSteps = 20;
  Processes run;
  // No --num_shards or --shard_id: mpirun's ranks give them.
  run.Start(Concat({kMpirun, "-np", "2", "--oversubscribe"},
                   Train(Concat(LeNet(mpirun_dir.path(), kBatch, kSteps * kBatch * 2, 1),
                                {"--run_id", UniqueName("mpirun")}))),
            mpirun_dir / "mpirun.out", kMpirunEnvironment);
  StartShards(
      &run, Concat(LeNet(hand_dir.path(), kBatch, kSteps * kBatch * 2, 1), {"--run_id", UniqueName("hand")}),
      2, hand_dir / "run");
  if (!ExpectAllSucceed(run, kRunLimit)) return;
  Comparison c = CompareCheckpoints(mpirun_dir / "m_1.safetensors", hand_dir / "m_1.safetensors");
  std::cout << fmt::format("mpirun vs hand-started shards: {}\n",
                           c.bitwise ? std::string("bitwise equal")
                                     : fmt::format("largest relative L2 difference {:.3g} ({})",
                                                   c.largest_relative, c.worst_tensor));
  EXPECT_TRUE(c.bitwise) << "largest relative L2 difference " << c.largest_relative << " in "
                         << c.worst_tensor;
}

TEST(DistributedTrainer, MpirunRejectsContradictingShardId) {
  if (access(kMpirun, X_OK) != 0) GTEST_SKIP() << "mpirun is not installed";
  TempDirectory dir;
  Processes run;
  // Rank 1 is told --shard_id 0; rank 0 agrees and gives up waiting for a shard 1 within the bound.
  run.Start(Concat({kMpirun, "-np", "2", "--oversubscribe"},
                   Train(Concat(NullData(dir.path(), 16, 1), {"--shard_id", "0", "--first_iter_timeout", "10",
                                                              "--run_id", UniqueName("mpirun_shard_id")}))),
            dir / "mpirun.out", kMpirunEnvironment);
  std::optional<int> code = run[0].Wait(kErrorLimit);
  ASSERT_TRUE(code) << "mpirun still runs";
  EXPECT_NE(*code, 0);
  EXPECT_NE(run[0].Output().find("lockstep: error: --shard_id 0 contradicts mpirun"), std::string::npos);
}

}  // namespace lockstep::testing
