// Mid-epoch checkpoints: written every N steps in the background with the newest kept, a resume from one
// that ends bit for bit where the uninterrupted run ends, LatestCheckpoint and --load_model_path latest, and
// the errors of bad flags and failed writes.
#include "lockstep/train/checkpoint.h"

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>

#include "lockstep/train/checkpoint_writer.h"
#include "lockstep/train/run_outputs.h"
#include "lockstep/train/safetensors.h"
#include "lockstep/train/trainer.h"
#include "synthetic_lenet.h"
#include "test_util.h"

namespace lockstep::testing {

namespace fs = std::filesystem;

namespace {

// The iterations of the mid-epoch checkpoints of "m" in `dir`.
std::vector<int64_t> Iterations(const fs::path& dir) {
  std::vector<int64_t> iterations;
  for (const auto& [iteration, path] : IterationCheckpoints(dir.string(), "m")) {
    EXPECT_EQ(path, IterationCheckpointPath(dir.string(), "m", iteration));
    iterations.push_back(iteration);
  }
  return iterations;
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Flips the bits of `mask` in the byte `from_end` bytes before the file's end (its tensor data).
void FlipBits(const fs::path& path, int from_end, char mask) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(-from_end, std::ios::end);
  const char byte = static_cast<char>(file.get());
  file.seekp(-from_end, std::ios::end);
  file.put(static_cast<char>(byte ^ mask));
}

// Runs the CLI; returns the exit code and what it printed on stdout and stderr.
std::pair<int, std::string> RunCli(const std::string& arguments) {
  const std::string output = ::testing::TempDir() + "/checkpoint_cli.txt";
  const int status = std::system((CliPath() + " " + arguments + " > " + output + " 2>&1").c_str());
  std::ifstream in(output);
  return {WEXITSTATUS(status), std::string(std::istreambuf_iterator<char>(in), {})};
}

// Every tensor of the two checkpoints is the same bytes.
void ExpectSameTensors(const std::string& actual_path, const std::string& expected_path) {
  SafetensorsFile actual = ReadSafetensors(actual_path), expected = ReadSafetensors(expected_path);
  ASSERT_EQ(actual.tensors.size(), expected.tensors.size());
  for (const auto& [name, want] : expected.tensors) {
    ASSERT_TRUE(actual.tensors.count(name)) << name;
    const Tensor& got = actual.tensors.at(name);
    ASSERT_EQ(got.shape(), want.shape()) << name;
    ASSERT_EQ(got.nbytes(), want.nbytes()) << name;
    EXPECT_EQ(std::memcmp(got.raw_data(), want.raw_data(), want.nbytes()), 0) << name << " differs";
  }
  for (const char* key : {"epochs_done", "iteration", "epoch_iteration", "reader_position", "images_trained"})
    EXPECT_EQ(actual.metadata[key], expected.metadata[key]) << key;
}

// The one line Train refuses `config` with; a run that is not refused fails the test.
std::string TrainRefusal(const TrainerConfig& config) {
  try {
    Train(config);
  } catch (const InvalidInput& e) {
    return e.what();
  }
  ADD_FAILURE() << "the run was not refused";
  return "";
}

}  // namespace

TEST(MidEpochCheckpoints, WrittenEveryNStepsWithTheNewestKept) {
  fs::path all_dir = FreshDir("mid_all");
  TrainerConfig config = SyntheticLeNet(all_dir);
  config.checkpoint_every_iters = 5;
  config.keep_checkpoints = 0;
  Train(config);
  // Steps 5, 10, 15 and 20 of the 24; step 12 and 24 end an epoch, whose checkpoint is the epoch's.
  EXPECT_EQ(Iterations(all_dir), (std::vector<int64_t>{5, 10, 15, 20}));
  EXPECT_TRUE(fs::exists(all_dir / "m_1.safetensors"));
  EXPECT_TRUE(fs::exists(all_dir / "m_2.safetensors"));
  EXPECT_EQ(IterationCheckpointPath(all_dir.string(), "m", 15),
            (all_dir / "m_iter0000000015.safetensors").string());
  auto metadata = ReadSafetensorsMetadata(IterationCheckpointPath(all_dir.string(), "m", 15));
  EXPECT_EQ(metadata["iteration"], "15");
  EXPECT_EQ(metadata["epochs_done"], "1");
  EXPECT_EQ(metadata["epoch_iteration"], "3");
  EXPECT_EQ(metadata["reader_position"], "120");
  EXPECT_EQ(metadata["images_trained"], "120");
  EXPECT_EQ(metadata["shard_images_trained"], "120");
  EXPECT_EQ(ReadSafetensors(IterationCheckpointPath(all_dir.string(), "m", 15)).tensors.size(),
            ReadSafetensors((all_dir / "m_2.safetensors").string()).tensors.size());

  fs::path kept_dir = FreshDir("mid_kept");
  config = SyntheticLeNet(kept_dir);
  config.checkpoint_every_iters = 5;  // keep_checkpoints: the default 2
  Train(config);
  EXPECT_EQ(Iterations(kept_dir), (std::vector<int64_t>{15, 20}));
  EXPECT_TRUE(fs::exists(kept_dir / "m_1.safetensors")) << "epoch checkpoints are never removed";
  EXPECT_TRUE(fs::exists(kept_dir / "m_2.safetensors"));
  for (const auto& entry : fs::directory_iterator(kept_dir))
    EXPECT_EQ(entry.path().string().find(".tmp."), std::string::npos) << entry.path();
}

// Trains 2 epochs of 12 steps on Fashion-MNIST on `devices` CPU devices, saving a checkpoint at step 17
// (step 5 of epoch 2), then resumes from it in a fresh directory: the final checkpoint is the same bytes.
void ResumeMidEpochExactly(int devices) {
  fs::path full_dir = FreshDir(fmt::format("mid_full_{}", devices));
  TrainerConfig config = SyntheticLeNet(full_dir);
  config.train_data = "fashion-mnist";
  config.batch_size = 32;
  config.epoch_size = 384;
  config.num_devices = devices;
  config.threads = devices;
  config.checkpoint_every_iters = 17;
  Train(config);
  const std::string step17 = IterationCheckpointPath(full_dir.string(), "m", 17);
  ASSERT_TRUE(fs::exists(step17));

  fs::path resumed_dir = FreshDir(fmt::format("mid_resumed_{}", devices));
  TrainerConfig resumed = config;
  resumed.log_dir = resumed.file_store_path = resumed_dir.string();
  resumed.load_model_path = step17;
  resumed.checkpoint_every_iters = 5;  // counted from the job's start: step 20 (24 ends the epoch)
  TrainerResult result = Train(resumed);
  ExpectSameTensors((resumed_dir / "m_2.safetensors").string(), (full_dir / "m_2.safetensors").string());
  EXPECT_EQ(Iterations(resumed_dir), std::vector<int64_t>{20});
  EXPECT_FALSE(fs::exists(resumed_dir / "m_1.safetensors"));
  // One row, for epoch 2: the 7 steps of this run (224 images), the running totals of the whole job.
  auto lines = Lines(result.log_path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_TRUE(std::regex_match(lines[2], std::regex(R"([\d.]+,[\d.]+,224,768,24,[\d.]+,[\d.]+,2,0\.1,.*)")))
      << lines[2];
}

TEST(MidEpochCheckpoints, ResumeEndsBitForBitLikeTheUninterruptedRunOnOneAndTwoDevices) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  ResumeMidEpochExactly(1);
  ResumeMidEpochExactly(2);
}

TEST(MidEpochCheckpoints, ResumeNeedsTheBatchAndEpochSizeItWasSavedWith) {
  fs::path dir = FreshDir("mid_epoch_size");
  TrainerConfig config = SyntheticLeNet(dir);  // 8 images a step, 12 steps an epoch
  config.checkpoint_every_iters = 10;
  Train(config);
  config.load_model_path = IterationCheckpointPath(dir.string(), "m", 10);
  // The checkpoints after step 10 aside: a resume from it would write over them.
  const fs::path later = FreshDir("mid_epoch_size_later");
  for (const char* name : {"m_1.safetensors", "m_iter0000000020.safetensors", "m_2.safetensors"})
    fs::rename(dir / name, later / name);
  struct Case {
    int batch_size;
    int64_t epoch_size;
    std::string says;
  } cases[] = {
      {8, 64, "this run takes 8 images a step and 8 steps an epoch"},      // step 10 lies past the epoch
      {8, 120, "this run takes 8 images a step and 15 steps an epoch"},    // the epoch's end moves
      {16, 192, "this run takes 16 images a step and 12 steps an epoch"},  // the batches taken would not
  };
  for (const Case& c : cases) {
    config.batch_size = c.batch_size;
    config.epoch_size = c.epoch_size;
    const std::string refusal = TrainRefusal(config);
    EXPECT_NE(
        refusal.find("stopped after step 10 of epoch 1 (8 images a step, 12 steps an epoch), but " + c.says),
        std::string::npos)
        << "--batch_size " << c.batch_size << " --epoch_size " << c.epoch_size << ": " << refusal;
  }
  // From an epoch's checkpoint the batch may change.
  for (const auto& entry : fs::directory_iterator(later))
    fs::rename(entry.path(), dir / entry.path().filename());
  config.num_epochs = 3;
  config.load_model_path = (dir / "m_2.safetensors").string();
  EXPECT_FALSE(Train(config).complete);
  EXPECT_EQ(ReadSafetensors((dir / "m_3.safetensors").string()).metadata["global_batch"], "16");
}

TEST(MidEpochCheckpoints, AFailedWriteStopsTrainingNamingTheFile) {
  fs::path dir = FreshDir("mid_unwritable");
  TrainerConfig config = SyntheticLeNet(dir);
  config.checkpoint_every_iters = 5;
  // A folder where step 5's checkpoint goes: the write's rename fails (a missing --file_store_path would
  // be created before the first step).
  const fs::path taken(IterationCheckpointPath(config.file_store_path, "m", 5));
  fs::create_directories(taken);
  std::ofstream(taken / "keep") << "a folder in the way";
  try {
    Train(config);
    FAIL() << "a checkpoint that could not be written went unreported";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(IterationCheckpointPath(config.file_store_path, "m", 5)),
              std::string::npos)
        << e.what();
  }
}

TEST(CheckpointWriter, WritesEverySnapshotAndKeepsTheNewestUpToItsOwn) {
  fs::path dir = FreshDir("writer");
  // A later checkpoint of another run (one resumed from an earlier point into this directory) is not this
  // run's to remove and does not count against the ones kept.
  Workspace ws;
  Tensor* w = ws.CreateBlob("scope/w");
  w->Resize({3});
  TrainerState state;
  state.model.name = "lenet";
  state.iteration = 100;
  SaveCheckpoint(IterationCheckpointPath(dir.string(), "m", 100), ws, "scope/", {"w"}, state);
  {
    CheckpointWriter writer(dir.string(), "m", 2);
    for (int64_t iteration = 1; iteration <= 5; ++iteration) {
      for (int i = 0; i < 3; ++i) w->data<float>()[i] = static_cast<float>(iteration * 10 + i);
      state.iteration = iteration;
      writer.SaveInBackground(ws, "scope/", {"w"}, state);
    }
    writer.Finish();
  }
  EXPECT_EQ(Iterations(dir), (std::vector<int64_t>{4, 5, 100}));
  // Each file holds the blob as it was when its snapshot was taken, not as training left it later.
  for (int64_t iteration : {4, 5}) {
    SafetensorsFile file = ReadSafetensors(IterationCheckpointPath(dir.string(), "m", iteration));
    EXPECT_EQ(Values(file.tensors.at("w")),
              (std::vector<float>{iteration * 10.0f, iteration * 10.0f + 1, iteration * 10.0f + 2}));
    EXPECT_EQ(file.metadata.at("iteration"), std::to_string(iteration));
  }
}

TEST(LatestCheckpoint, PicksTheLargestIterationAndSkipsOtherFiles) {
  fs::path dir = FreshDir("latest");
  EXPECT_EQ(LatestCheckpoint(dir.string(), "m"), "");
  EXPECT_EQ(LatestCheckpoint((dir / "absent").string(), "m"), "");
  TrainerConfig config = SyntheticLeNet(dir);
  config.checkpoint_every_iters = 5;
  config.keep_checkpoints = 0;
  Train(config);  // m_1 (step 12), m_2 (24), m_iter 5, 10, 15, 20
  // Another name that starts alike, further on: not a checkpoint of "m".
  TrainerConfig other = SyntheticLeNet(dir);
  other.save_model_name = "m_long";
  other.log_dir =
      (dir / "m_long_logs").string();  // its log would take the first run's name in the same second
  fs::create_directory(other.log_dir);
  other.num_epochs = 3;
  Train(other);
  EXPECT_EQ(LatestCheckpoint(dir.string(), "m"), (dir / "m_2.safetensors").string());

  // A write in progress, a broken file and a foreign safetensors file under names that would win.
  fs::copy_file(dir / "m_long_3.safetensors", dir / "m_9.safetensors.tmp.1234");
  std::ofstream(dir / "m_99.safetensors") << "not a checkpoint";
  std::ofstream(dir / "m_iter0000000099.safetensors");  // empty
  Tensor x({1}, DataType::kFloat);
  WriteSafetensors((dir / "m_98.safetensors").string(), {{"x", &x}}, {{"iteration", "1000"}});
  std::vector<std::string> skipped;
  EXPECT_EQ(LatestCheckpoint(dir.string(), "m", &skipped), (dir / "m_2.safetensors").string());
  ASSERT_EQ(skipped.size(), 3u);  // in name order; the temporary file is not a candidate
  EXPECT_EQ(skipped[0], (dir / "m_98.safetensors").string() + " is not a lockstep training checkpoint");
  EXPECT_NE(skipped[1].find("checkpoint " + (dir / "m_99.safetensors").string() + " "), std::string::npos);
  EXPECT_NE(skipped[2].find("checkpoint " + IterationCheckpointPath(dir.string(), "m", 99) + " is truncated"),
            std::string::npos);

  // A flipped bit in the newest checkpoint's tensor bytes: the one before it is taken, and the reason given.
  FlipBits(dir / "m_2.safetensors", 1, 0x04);
  skipped.clear();
  EXPECT_EQ(LatestCheckpoint(dir.string(), "m", &skipped), IterationCheckpointPath(dir.string(), "m", 20));
  EXPECT_EQ(skipped.size(), 4u);
  EXPECT_NE(skipped.back().find("checkpoint " + (dir / "m_2.safetensors").string() + " is corrupt: tensor '"),
            std::string::npos)
      << skipped.back();

  fs::remove(dir / "m_2.safetensors");
  EXPECT_EQ(LatestCheckpoint(dir.string(), "m"), IterationCheckpointPath(dir.string(), "m", 20));
}

TEST(LatestCheckpoint, LoadModelPathLatestStartsFreshThenResumes) {
  fs::path dir = FreshDir("latest_cli");
  const std::string flags = fmt::format(
      "train --use_cpu --model lenet --train_data null --num_channels 1 --image_size 28 --num_labels 10 "
      "--batch_size 8 --epoch_size 96 --threads 1 --save_model_name m --file_store_path {0} "
      "--checkpoint_every_iters 5 --load_model_path latest",
      dir.string());
  // Each run logs to its own directory: two runs in the same second would want the same log name.
  fs::create_directory(dir / "fresh");
  fs::create_directory(dir / "resumed");
  auto [fresh_code, fresh] = RunCli(flags + " --num_epochs 1 --log_dir " + (dir / "fresh").string());
  ASSERT_EQ(fresh_code, 0) << fresh;
  EXPECT_NE(fresh.find("--load_model_path latest: no checkpoint m_*.safetensors in " + dir.string() +
                       "; starting fresh"),
            std::string::npos)
      << fresh;
  auto [resumed_code, resumed] = RunCli(flags + " --num_epochs 2 --log_dir " + (dir / "resumed").string());
  ASSERT_EQ(resumed_code, 0) << resumed;
  EXPECT_NE(resumed.find("--load_model_path latest: resuming from " + (dir / "m_1.safetensors").string()),
            std::string::npos)
      << resumed;
  EXPECT_EQ(ReadSafetensorsMetadata((dir / "m_2.safetensors").string())["iteration"], "24");

  // The run has every epoch: resuming it again succeeds without training.
  auto [complete_code, complete] = RunCli(flags + " --num_epochs 2 --log_dir " + (dir / "resumed").string());
  EXPECT_EQ(complete_code, 0) << complete;
  EXPECT_NE(complete.find("checkpoint " + (dir / "m_2.safetensors").string() +
                          " has 2 epochs of --num_epochs 2: the run is complete"),
            std::string::npos)
      << complete;
  EXPECT_EQ(complete.find("epoch 3"), std::string::npos) << complete;
}

// A checkpoint whose tensor bytes changed is refused naming the tensor, with exit code 2 (a restart would
// fail the same way), and in a log that merges stdout and stderr the error is the last line.
TEST(LatestCheckpoint, CorruptCheckpointIsRefusedAndItsErrorEndsTheLog) {
  fs::path dir = FreshDir("corrupt_cli");
  TrainerConfig config = SyntheticLeNet(dir);
  config.num_epochs = 1;
  Train(config);
  const fs::path path = dir / "m_1.safetensors";
  FlipBits(path, 5, 0x7f);
  auto [code, output] = RunCli(fmt::format(
      "train --use_cpu --model lenet --train_data null --num_channels 1 --image_size 28 --num_labels 10 "
      "--batch_size 8 --epoch_size 96 --threads 1 --num_epochs 2 --log_dir {} --load_model_path {}",
      dir.string(), path.string()));
  EXPECT_EQ(code, kExitNotRetryable) << output;
  EXPECT_EQ(output.rfind("lockstep ", 0), 0u) << "the version line comes first:\n" << output;
  const size_t last = output.rfind('\n', output.size() - 2) + 1;
  EXPECT_TRUE(std::regex_match(
      output.substr(last),
      std::regex("lockstep: error: checkpoint .*m_1\\.safetensors is corrupt: tensor '[a-z0-9_]+' "
                 "has CRC32 [0-9a-f]{8} but the file records [0-9a-f]{8}; take an earlier "
                 "checkpoint\n")))
      << output;
}

// The refusals name the newest checkpoint of the run, which the file names sort before epoch 9's.
TEST(CheckpointWriter, RefusalsNameTheNewestCheckpointPastNine) {
  fs::path dir = FreshDir("ten_epochs");
  TrainerConfig config = SyntheticLeNet(dir);
  config.epoch_size = 8;
  config.num_epochs = 10;
  Train(config);
  EXPECT_NE(TrainRefusal(config).find(
                fmt::format("10 checkpoint(s) of an earlier run ({}),", (dir / "m_10.safetensors").string())),
            std::string::npos);
  config.load_model_path = (dir / "m_5.safetensors").string();
  const std::vector<std::string> later = CheckpointsAfter(dir.string(), "m", config.load_model_path);
  ASSERT_EQ(later.size(), 5u);
  EXPECT_EQ(later.front(), (dir / "m_6.safetensors").string());
  EXPECT_NE(TrainRefusal(config).find(
                fmt::format("5 checkpoint(s) of m taken later ({}),", (dir / "m_10.safetensors").string())),
            std::string::npos);
}

// A second fresh run under the same --save_model_name would write over the first one's checkpoints: it is
// refused before its first step, and leaves them as they were; resuming them, or another name, goes ahead.
TEST(CheckpointWriter, AFreshRunDoesNotOverwriteAnEarlierRunsCheckpoints) {
  fs::path dir = FreshDir("second_run");
  TrainerConfig config = SyntheticLeNet(dir);
  config.num_epochs = 1;
  Train(config);
  const fs::path first = dir / "m_1.safetensors";
  const auto written = fs::last_write_time(first);
  const auto bytes = fs::file_size(first);
  EXPECT_EQ(
      TrainRefusal(config),
      fmt::format("--save_model_name m: {} holds 1 checkpoint(s) of an earlier run ({}), which this run "
                  "would overwrite; resume it with --load_model_path latest, or pass another "
                  "--save_model_name or --file_store_path",
                  dir.string(), (dir / "m_1.safetensors").string()));
  EXPECT_EQ(fs::last_write_time(first), written);
  EXPECT_EQ(fs::file_size(first), bytes);

  TrainerConfig resumed = config;
  resumed.num_epochs = 2;
  resumed.load_model_path = "latest";
  Train(resumed);
  EXPECT_TRUE(fs::exists(dir / "m_2.safetensors"));
  TrainerConfig other = config;
  other.save_model_name = "n";
  Train(other);
  EXPECT_TRUE(fs::exists(dir / "n_1.safetensors"));
  // Resumed from another run's checkpoint, it would overwrite m_2 with n's continuation.
  TrainerConfig crossed = resumed;
  crossed.num_epochs = 3;
  crossed.load_model_path = (dir / "n_1.safetensors").string();
  EXPECT_EQ(
      TrainRefusal(crossed),
      fmt::format("--save_model_name m: {} holds 2 checkpoint(s) of an earlier run ({}), which this run, "
                  "resumed from {}, would overwrite; pass another --save_model_name or --file_store_path",
                  dir.string(), (dir / "m_2.safetensors").string(), crossed.load_model_path));
  crossed.load_model_path = (dir / "m_2.safetensors").string();  // its own: it goes on
  EXPECT_FALSE(Train(crossed).complete);

  // Resumed from an earlier point of its own run, it would write over m_2 and m_3.
  TrainerConfig back = crossed;
  back.load_model_path = (dir / "m_1.safetensors").string();
  EXPECT_EQ(
      TrainRefusal(back),
      fmt::format("--load_model_path {}: {} holds 2 checkpoint(s) of m taken later ({}), which this run "
                  "would overwrite; resume from the newest (--load_model_path latest), or move the later "
                  "ones away to go back",
                  back.load_model_path, dir.string(), (dir / "m_3.safetensors").string()));
  // A later checkpoint whose checksums fail is no progress to lose (`latest` passes over it): the run resumed
  // from the newest sound one goes on and writes the later one again.
  FlipBits(dir / "m_3.safetensors", 1, 0x04);
  EXPECT_THROW(VerifySafetensors((dir / "m_3.safetensors").string()), Error);
  EXPECT_FALSE(Train(crossed).complete);
  VerifySafetensors((dir / "m_3.safetensors").string());

  // --load_model_path latest where no file of the name can be resumed: a fresh start would write over them.
  fs::path unreadable = FreshDir("second_run_unreadable");
  std::ofstream(unreadable / "m_1.safetensors") << "not a checkpoint";
  TrainerConfig fresh = SyntheticLeNet(unreadable);
  fresh.num_epochs = 1;
  fresh.load_model_path = "latest";
  EXPECT_THROW(Train(fresh), InvalidInput);
  EXPECT_EQ(ReadFile((unreadable / "m_1.safetensors").string()), "not a checkpoint");
  fs::remove(unreadable / "m_1.safetensors");  // with nothing of the name there, it starts fresh
  Train(fresh);
  EXPECT_EQ(ReadSafetensorsMetadata((unreadable / "m_1.safetensors").string()).at("epochs_done"), "1");
}

// Two runs started at once under one name in one folder would both write its checkpoints: the second is
// refused while the first holds the name, whatever either finds there.
TEST(CheckpointWriter, ARunningRunHoldsItsCheckpointName) {
  fs::path dir = FreshDir("claimed");
  auto first = std::make_unique<CheckpointClaim>(dir.string(), "m");
  try {
    CheckpointClaim second(dir.string(), "m");
    FAIL() << "two claims on one name";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(
        std::string(e.what()),
        fmt::format("--save_model_name m: another running process saves checkpoints of this name in {}; "
                    "pass another --save_model_name or --file_store_path, or wait until that run ends",
                    dir.string()));
  }
  TrainerConfig config = SyntheticLeNet(dir);
  config.num_epochs = 1;
  EXPECT_THROW(Train(config), InvalidInput);
  EXPECT_FALSE(fs::exists(dir / "m_1.safetensors"));
  CheckpointClaim other_name(dir.string(), "n");  // names are claimed one by one
  // What a run killed while writing a checkpoint left: the next run of the name removes it, not another's.
  for (const char* left :
       {"m_2.safetensors.tmp.4242", "m_iter7.safetensors.tmp.4243", "m_x_2.safetensors.tmp.1",
        "n_2.safetensors.tmp.4244", "m_2.safetensors.tmp.notapid"})
    std::ofstream(dir / left) << "partial";
  first.reset();
  Train(config);
  EXPECT_TRUE(fs::exists(dir / "m_1.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "m_2.safetensors.tmp.4242"));
  EXPECT_FALSE(fs::exists(dir / "m_iter7.safetensors.tmp.4243"));
  for (const char* kept :
       {"m_x_2.safetensors.tmp.1", "n_2.safetensors.tmp.4244", "m_2.safetensors.tmp.notapid"})
    EXPECT_TRUE(fs::exists(dir / kept)) << kept;
}

TEST(MidEpochCheckpoints, BadFlagsGiveOneLine) {
  const std::string base =
      "train --use_cpu --model lenet --train_data null --image_size 28 --num_channels 1 --epoch_size 8 "
      "--batch_size 8 ";
  struct Case {
    std::string arguments, message;
  } cases[] = {
      {base + "--checkpoint_every_iters 5",
       "--checkpoint_every_iters needs --save_model_name: the name of the checkpoints to write"},
      {base + "--load_model_path latest", "--load_model_path latest needs --save_model_name"},
      {base + "--save_model_name /tmp/runs/m",
       "--save_model_name '/tmp/runs/m' is a path, not a name: checkpoints go to "
       "{file_store_path}/{save_model_name}_{epoch}.safetensors; pass the folder as --file_store_path and a "
       "name without '/'"},
      {base + "--save_model_name ..", "--save_model_name '..' is a path, not a name"},
      {base + "--save_model_name m --checkpoint_every_iters -1",
       "--checkpoint_every_iters must be >= 0, got -1"},
      {base + "--save_model_name m --keep_checkpoints 2000000", "--keep_checkpoints must be at most 1000000"},
  };
  for (const auto& c : cases) {
    auto [code, output] = RunCli(c.arguments);
    EXPECT_NE(code, 0) << c.arguments;
    EXPECT_NE(output.find(c.message), std::string::npos) << c.arguments << "\noutput: " << output;
    EXPECT_LE(std::count(output.begin(), output.end(), '\n'), 2) << output;
  }
}

}  // namespace lockstep::testing
