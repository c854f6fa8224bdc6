// The trainer end to end on small runs: log format, checkpoints, exact resume, and one-line errors from the
// CLI.
#include "lockstep/train/trainer.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>
#include <tuple>

#include "lockstep/train/checkpoint.h"
#include "lockstep/train/safetensors.h"
#include "test_util.h"

namespace lockstep::testing {

namespace fs = std::filesystem;

namespace {

TrainerConfig SmallLeNet(const fs::path& dir) {
  TrainerConfig config;
  config.model = "lenet";
  config.train_data = "fashion-mnist";
  config.num_channels = 1;
  config.image_size = 28;
  config.num_labels = 10;
  config.batch_size = 64;
  config.epoch_size = 640;
  config.num_epochs = 2;
  config.base_learning_rate = 0.1f;
  config.momentum = 0.9f;
  config.weight_decay = 1e-4f;
  config.threads = 1;
  config.log_dir = dir.string();
  config.file_store_path = dir.string();
  config.save_model_name = "lenet";
  config.arguments = "test run";
  return config;
}

std::vector<std::string> Lines(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Runs the CLI with arguments; returns the exit code and what it printed on stderr.
std::pair<int, std::string> RunCli(const std::string& arguments) {
  std::string err = ::testing::TempDir() + "/cli_stderr.txt";
  std::string command = CliPath() + " " + arguments + " > /dev/null 2> " + err;
  int status = std::system(command.c_str());
  std::ifstream in(err);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return {WEXITSTATUS(status), text};
}

// Trains 2 epochs on `devices` CPU devices, checks the log, then resumes from the first epoch's checkpoint
// in a fresh directory and checks that the second epoch ends at the same parameters. Returns the checkpoint.
SafetensorsFile TrainAndResume(int devices) {
  fs::path dir = FreshDir(fmt::format("resume_{}", devices));
  TrainerConfig config = SmallLeNet(dir);
  config.num_devices = devices;
  TrainerResult full = Train(config);

  // Log: name, first line, header, one row per epoch with test accuracy -1 (no test data).
  std::regex name(fmt::format(R"(lenet_gpu{}_b64_L10_lr0\.10_v2_\d{{8}}_\d{{6}}\.log)", devices));
  EXPECT_TRUE(std::regex_match(fs::path(full.log_path).filename().string(), name)) << full.log_path;
  auto lines = Lines(full.log_path);
  EXPECT_EQ(lines.size(), 4u);
  if (lines.size() != 4u) return {};
  EXPECT_EQ(lines[0], "# test run");
  EXPECT_EQ(lines[1],
            "time_spent,cumulative_time_spent,input_count,cumulative_input_count,cumulative_batch_count,"
            "inputs_per_sec,accuracy,epoch,learning_rate,loss,test_accuracy");
  std::regex row(R"([\d.]+,[\d.]+,640,1280,20,[\d.]+,[\d.]+,2,0\.1,[\d.]+,-1\.000000)");
  EXPECT_TRUE(std::regex_match(lines[3], row)) << lines[3];

  // Resume from the first epoch's checkpoint in a fresh directory: same final parameters.
  EXPECT_TRUE(fs::exists(dir / "lenet_1.safetensors"));
  fs::path resumed_dir = FreshDir(fmt::format("resumed_{}", devices));
  TrainerConfig resumed = SmallLeNet(resumed_dir);
  resumed.num_devices = devices;
  resumed.load_model_path = (dir / "lenet_1.safetensors").string();
  TrainerResult second = Train(resumed);
  auto resumed_lines = Lines(second.log_path);
  EXPECT_EQ(resumed_lines.size(), 3u) << "one row: the second epoch";
  if (resumed_lines.size() == 3u)
    EXPECT_TRUE(std::regex_match(resumed_lines[2], row)) << "running totals continue: " << resumed_lines[2];
  auto expected = ReadSafetensors((dir / "lenet_2.safetensors").string());
  auto actual = ReadSafetensors((resumed_dir / "lenet_2.safetensors").string());
  EXPECT_EQ(expected.tensors.size(), 8u * 2 + 1) << "params, momenta and the iteration counter";
  EXPECT_EQ(actual.tensors.size(), expected.tensors.size());
  for (const auto& [name, tensor] : expected.tensors)
    if (tensor.dtype() == DataType::kFloat && actual.tensors.count(name))
      ExpectNear(actual.tensors.at(name), tensor, 1e-6f);
  EXPECT_EQ(actual.metadata.at("iteration"), "20");
  EXPECT_EQ(actual.metadata.at("epochs_done"), "2");
  return expected;
}

}  // namespace

TEST(Trainer, WritesLogAndCheckpointsAndResumesExactlyOnOneAndTwoDevices) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  SafetensorsFile one = TrainAndResume(1);
  SafetensorsFile two = TrainAndResume(2);
  ASSERT_EQ(two.tensors.size(), one.tensors.size()) << "device 0's state, name scope stripped";
  for (const auto& [name, tensor] : one.tensors)
    if (tensor.dtype() == DataType::kFloat) ExpectNear(two.tensors.at(name), tensor, 1e-4f);
}

// --lr_step_epochs: the rate drops by --lr_gamma every that many epochs, counted in the job's steps (as
// Caffe2's, whose step counter starts at 1, so an epoch's last step already has the next rate); a resumed run
// goes on with the schedule.
TEST(Trainer, LearningRateStepsEveryLrStepEpochs) {
  fs::path dir = FreshDir("lr_steps");
  TrainerConfig config = SmallLeNet(dir);
  config.train_data = "null";
  config.num_epochs = 3;
  config.lr_step_epochs = 1;
  config.lr_gamma = 0.5f;
  config.iter_log = (dir / "steps.csv").string();
  config.log_every_iters = 5;
  Train(config);
  std::vector<std::string> rates;  // the iteration log's learning_rate column: every 5 steps of 10
  for (const std::string& line : Lines(config.iter_log))
    if (line.find("unix_time") == std::string::npos) {
      std::vector<std::string> fields;
      std::stringstream in(line);
      for (std::string field; std::getline(in, field, ',');) fields.push_back(field);
      rates.push_back(fields.at(8));
    }
  EXPECT_EQ(rates, (std::vector<std::string>{"0.1", "0.05", "0.05", "0.025", "0.025", "0.0125"}));

  fs::path resumed_dir = FreshDir("lr_steps_resumed");
  TrainerConfig resumed = config;
  resumed.log_dir = resumed.file_store_path = resumed_dir.string();
  resumed.iter_log.clear();
  resumed.load_model_path = (dir / "lenet_1.safetensors").string();
  const std::vector<std::string> rows = Lines(Train(resumed).log_path);
  ASSERT_EQ(rows.size(), 4u) << "epochs 2 and 3";
  EXPECT_NE(rows[2].find(",2,0.025,"), std::string::npos) << rows[2];
  EXPECT_NE(rows[3].find(",3,0.0125,"), std::string::npos) << rows[3];
}

// A run resumed from an earlier checkpoint trains the steps after it again: the --iter_log rows the first
// run wrote for them give way to the new ones, and elapsed_seconds goes on from the checkpoint's time.
TEST(Trainer, ResumedRunReplacesTheIterLogRowsOfTheStepsItTrainsAgain) {
  fs::path dir = FreshDir("iter_log_resume");
  TrainerConfig config = SmallLeNet(dir);
  config.train_data = "null";
  config.iter_log = (dir / "steps.csv").string();
  config.log_every_iters = 5;
  Train(config);  // 2 epochs of 10 steps: rows at steps 5, 10, 15 and 20
  TrainerConfig resumed = config;
  resumed.log_dir = resumed.file_store_path = FreshDir("iter_log_resumed").string();
  resumed.load_model_path = (dir / "lenet_1.safetensors").string();
  Train(resumed);  // epoch 2 again
  std::vector<std::string> positions;
  double elapsed = 0;
  for (const std::string& line : Lines(config.iter_log)) {
    if (line.find("unix_time") != std::string::npos) continue;
    std::vector<std::string> fields;
    std::stringstream in(line);
    for (std::string field; std::getline(in, field, ',');) fields.push_back(field);
    positions.push_back(fields.at(2) + "/" + fields.at(3));
    EXPECT_GE(std::stod(fields.at(1)), elapsed) << line;
    elapsed = std::stod(fields.at(1));
  }
  EXPECT_EQ(positions, (std::vector<std::string>{"1/5", "1/10", "2/5", "2/10"}));
}

// LeNet on synthetic data (or what `adjust` makes of it), batch 16, with one oneDNN thread per device (see
// below); the final checkpoint.
static SafetensorsFile TrainSplitLeNet(const std::string& name, int devices, int stages, int micro_batches,
                                       int steps, const std::function<void(TrainerConfig*)>& adjust = {}) {
  fs::path dir = FreshDir(name);
  TrainerConfig config = SmallLeNet(dir);
  if (adjust) adjust(&config);
  config.train_data = "null";
  config.batch_size = 16;
  config.epoch_size = 16 * steps;
  config.num_epochs = 1;
  config.threads = devices;
  config.num_devices = devices;
  config.model_parallel = stages;
  config.micro_batches = micro_batches;
  Train(config);
  return ReadSafetensors((dir / "lenet_1.safetensors").string());
}

// Stages and micro-batches must compute what one device computes. Every run gives each device one oneDNN
// thread: oneDNN splits the batch reductions of its backward kernels (convolution weights and bias) among
// threads, so a different thread count alone regroups float sums. Compared over several updates, such
// rounding differences then get amplified at a ReLU: with AVX2 kernels, 1 vs 2 threads left one relu2 input
// of step 10 at +3.2e-10 in one run and -6.7e-10 in the other, so that unit's gradient (and, through
// momentum, every later update) counted in one run only: 1.6e-4 relative on conv1_b.
TEST(Trainer, ModelParallelStagesTrainBitForBitLikeOneDevice) {
  // Stages alone run the one device's operators on the same batch with the same kernels, in another order:
  // bit for bit the same parameters after 10 updates (2 and 3 stages; one replica, whose batch is not split).
  SafetensorsFile one = TrainSplitLeNet("mp_one", 1, 1, 1, 10);
  for (auto [devices, stages] : {std::pair{2, 2}, std::pair{3, 3}}) {
    SafetensorsFile split = TrainSplitLeNet(fmt::format("mp_{}_{}", devices, stages), devices, stages, 1, 10);
    ASSERT_EQ(split.tensors.size(), one.tensors.size());
    for (const auto& [name, tensor] : one.tensors)
      if (tensor.dtype() == DataType::kFloat)
        EXPECT_EQ(Values(split.tensors.at(name)), Values(tensor)) << name << " with " << stages << " stages";
  }
}

// Replicas of two stages each, normalizing with the statistics of the whole batch (--combine_spatial_bn):
// the stages of a replica compute what its one device computes, bit for bit. ResNet-18 has a stage boundary
// between a BN and the convolution it feeds.
TEST(Trainer, ModelParallelReplicasWithCombinedBatchNormTrainLikeOneDeviceEach) {
  auto resnet18 = [](TrainerConfig* config) {
    config->model = "resnet18";
    config->num_channels = 3, config->image_size = 32;
    config->combine_spatial_bn = true;
  };
  SafetensorsFile replicas = TrainSplitLeNet("combined_replicas", 2, 1, 1, 1, resnet18);
  SafetensorsFile staged = TrainSplitLeNet("combined_staged_replicas", 4, 2, 1, 1, resnet18);
  ASSERT_EQ(staged.tensors.size(), replicas.tensors.size());
  for (const auto& [name, tensor] : replicas.tensors)
    if (tensor.dtype() == DataType::kFloat) EXPECT_EQ(Values(staged.tensors.at(name)), Values(tensor)) << name;
}

TEST(Trainer, ModelParallelStagesWithMicroBatchesTrainLikeOneDevice) {
  // One update. Error bound: from equal parameters every per-image value of the step is computed by the same
  // kernels; a weight or bias gradient is a float32 sum of n terms (images x positions), which the split run
  // groups into micro-batch partial sums added by Sum. A blocked sum lies within about log2(n) u sum|t| of
  // the exact one (u = 2^-24; Higham, Accuracy and Stability of Numerical Algorithms, 4.2), so two groupings
  // differ by at most 2 log2(n) u kappa relative, kappa = |sum|t|| / |sum t| over the channels. After one
  // update a bias is -lr x its gradient. The worst here is conv1_b: n = 16 x 26 x 26, kappa = 17 (computed
  // from the step's dY; random labels make terms of both signs), so 2 x 13.4 x 17 u = 2.7e-5; measured 1.6e-6
  // to 1.9e-6 with AVX2 and AVX-512 kernels. Over more updates no rounding bound holds: a ReLU input flips
  // (see above).
  SafetensorsFile one = TrainSplitLeNet("mb_one", 1, 1, 1, 1);
  // 2 replicas x 2 stages, 4 micro-batches each; and 1 replica x 3 stages, 2 micro-batches.
  for (auto [devices, stages, micro_batches] : {std::tuple{4, 2, 4}, std::tuple{3, 3, 2}}) {
    SafetensorsFile split =
        TrainSplitLeNet(fmt::format("mb_{}_{}", stages, micro_batches), devices, stages, micro_batches, 1);
    ASSERT_EQ(split.tensors.size(), one.tensors.size());
    for (const auto& [name, tensor] : one.tensors)
      if (tensor.dtype() == DataType::kFloat)
        EXPECT_LE(RelativeDifference(Values(split.tensors.at(name)), Values(tensor)), 3e-5)
            << name << " with " << stages << " stages x " << micro_batches << " micro-batches";
  }
}

TEST(Trainer, LoadRejectsCorruptAndMismatchedCheckpoints) {
  fs::path dir = FreshDir("bad_checkpoint");
  TrainerConfig config = SmallLeNet(dir);
  config.train_data = "null";  // synthetic: no dataset needed
  config.batch_size = 8;
  config.epoch_size = 8;
  config.num_epochs = 1;
  Train(config);
  fs::path good = dir / "lenet_1.safetensors";
  ASSERT_TRUE(fs::exists(good));

  config.num_epochs = 2;
  config.save_model_name.clear();
  // A model with 5 labels contradicts the checkpoint's 10, which its metadata records.
  config.load_model_path = good.string();
  config.num_labels = 5;
  try {
    Train(config);
    FAIL() << "mismatched checkpoint loaded";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()), "--num_labels 5 contradicts the checkpoint " + good.string() +
                                         ", which holds 10; drop --num_labels or load a checkpoint of "
                                         "--num_labels 5");
  }
  // Truncated file.
  config.num_labels = 10;
  fs::path truncated = dir / "truncated.safetensors";
  fs::copy_file(good, truncated);
  fs::resize_file(truncated, fs::file_size(good) / 2);
  config.load_model_path = truncated.string();
  EXPECT_THROW(Train(config), InvalidInput);
}

// Output folders that do not exist yet are created before the first step, as `mkdir -p` would.
TEST(Trainer, CreatesMissingOutputFolders) {
  fs::path dir = FreshDir("output_folders");
  TrainerConfig config = SmallLeNet(dir);
  config.train_data = "null";  // synthetic: no dataset needed
  config.batch_size = 8;
  config.epoch_size = 8;
  config.num_epochs = 1;
  config.file_store_path = (dir / "runs" / "lenet" / "checkpoints").string();
  config.log_dir = (dir / "logs" / "lenet").string();
  config.iter_log = (dir / "curves" / "iter.csv").string();
  TrainerResult result = Train(config);
  EXPECT_TRUE(fs::exists(dir / "runs" / "lenet" / "checkpoints" / "lenet_1.safetensors"));
  EXPECT_EQ(fs::path(result.log_path).parent_path(), dir / "logs" / "lenet");
  EXPECT_TRUE(fs::exists(dir / "curves" / "iter.csv"));
}

// A configuration built in code whose device list and count disagree is refused, not trained on one device.
TEST(Trainer, DevicesListedAndCountedMustAgree) {
  TrainerConfig config = SmallLeNet(FreshDir("gpus_and_count"));
  config.train_data = "null";
  config.gpus = {0, 1};
  try {
    Train(config);
    ADD_FAILURE() << "trained with --gpus 0,1 on 1 device";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "--gpus lists 2 devices but --num_gpus is 1; give one of them");
  }
}

// An output folder that cannot be written stops the run before any step, with one line naming the flag.
TEST(TrainerCli, UnwritableOutputFolderNamesItsFlagBeforeTraining) {
  fs::path dir = FreshDir("unwritable_outputs");
  const std::string file = (dir / "a_file").string();
  std::ofstream(file) << "not a folder";
  const std::string base =
      "train --use_cpu --model lenet --train_data null --num_channels 1 --image_size 28 --num_labels 10 "
      "--batch_size 8 --epoch_size 8 --threads 1 ";
  struct Case {
    std::string flags, message;
  } cases[] = {
      {"--log_dir " + file, "--log_dir '" + file + "' is not a directory; pass a directory"},
      {"--log_dir " + dir.string() + " --save_model_name m --file_store_path " + file + "/checkpoints",
       "--file_store_path '" + file + "/checkpoints': cannot create it"},
      {"--log_dir " + dir.string() + " --iter_log " + file + "/iter.csv",
       "--iter_log '" + file + "/iter.csv': '" + file + "' is a file, not a folder; name a file in a folder"},
  };
  for (const auto& c : cases) {
    auto [code, err] = RunCli(base + c.flags);
    EXPECT_EQ(code, kExitNotRetryable) << c.flags << ": running it again fails again";
    EXPECT_EQ(err.rfind("lockstep: error: " + c.message, 0), 0u) << c.flags << "\nstderr: " << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  }
  for (const auto& entry : fs::directory_iterator(dir))
    EXPECT_NE(entry.path().extension(), ".log") << "no run started: " << entry.path();
}

// Caffe2's scripts give switches a value (argparse's type=bool): --use_cpu 1 trains on the CPU, as --use_cpu.
TEST(TrainerCli, SwitchesTakeCaffe2sValues) {
  fs::path dir = FreshDir("switch_values");
  const std::string run =
      "train --train_data null --num_channels 1 --image_size 28 --model lenet --batch_size 4 "
      "--epoch_size 4 --threads 1 --log_dir " +
      dir.string();
  for (const char* value : {"", " 1", " True", "=true"}) {
    auto [code, err] = RunCli(run + " --use_cpu" + value);
    EXPECT_EQ(code, 0) << "--use_cpu" << value << ": " << err;
  }
  auto [code, err] = RunCli(run + " --use_cpu yes");
  EXPECT_EQ(code, kExitNotRetryable);
  EXPECT_EQ(err, "lockstep: error: --use_cpu yes: not a truth value; use true or false\n");
}

TEST(TrainerCli, BadInputGivesOneLineAndNonZeroExit) {
  const std::string base = "train --use_cpu --train_data null --image_size 32 --epoch_size 4 --batch_size 4 ";
  struct Case {
    std::string arguments, message;
  } cases[] = {
      {base + "--model alexnet", "unknown --model 'alexnet'"},
      {base + "--model lenet --frobnicate 3",
       "lockstep: error: unknown flag --frobnicate (`lockstep train --help` lists the flags)\n"},
      {base + "--model lenet --batchsize 3",
       "lockstep: error: unknown flag --batchsize; did you mean --batch_size? (`lockstep train --help` lists "
       "the flags)\n"},
      {base + "--model lenet --epochs=3 --load_model x",
       "unknown flag --epochs; did you mean --num_epochs?; unknown flag --load_model; did you mean "
       "--load_model_path?"},
      {base + "--num_layers 18",
       "unknown flag --num_layers; the depth is in the model's name: --model resnet18, resnet34, resnet50 or "
       "resnet101"},
      {base + "--model lenet stray",
       "unexpected argument(s) stray (`lockstep train --help` lists the flags)"},
      {"evl --use_cpu",
       "lockstep: error: unknown command 'evl'; did you mean eval? (`lockstep --help` lists the "
       "commands)\n"},
      {"train --train_data null --model lenet", "pass --use_cpu"},
      {"train --use_cpu --train_data null --model lenet --batch_size 0",
       "--batch_size must be at least 1, got 0"},
      {base + "--model lenet --load_model_path /nonexistent/x.safetensors", "/nonexistent/x.safetensors"},
      {"train --use_cpu --model lenet --train_data fashion-mnist --image_size 32",
       "does not match fashion-mnist"},
      {base + "--model lenet --num_gpus 3", "--batch_size 4 does not divide evenly among 3 replicas"},
      {base + "--model lenet --num_gpus 0", "--num_gpus must be at least 1"},
      {base + "--model lenet --gpus 1,1", "--gpus takes distinct device ids, e.g. --gpus 0,1"},
      {base + "--model lenet --nesterov --momentum 0",
       "--nesterov needs --momentum above 0 (without momentum it is plain SGD); drop one"},
      {base + "--model lenet --num_gpus 2 --model_parallel 3", "--num_gpus 2 does not divide into replicas"},
      {base + "--model lenet --micro_batches 3", "among 1 replica x 3 micro-batches; use a multiple of 3"},
      {"train --use_cpu --train_data null --image_size 32 --epoch_size 20 --batch_size 20 --model lenet "
       "--num_gpus 20 --model_parallel 20",
       "--model_parallel 20 is more stages than the 12 layers of lenet"},
      {base + "--model lenet --allreduce_algorithm foo", "unknown --allreduce_algorithm 'foo'; choose auto"},
      {"train --use_cpu --train_data null --image_size 32 --batch_size 4 --model lenet --epoch_size 0",
       "--epoch_size 0 asks for one pass over the data, but --train_data null never ends"},
  };
  for (const auto& c : cases) {
    auto [code, err] = RunCli(c.arguments);
    EXPECT_NE(code, 0) << c.arguments;
    EXPECT_NE(err.find(c.message), std::string::npos) << c.arguments << "\nstderr: " << err;
    EXPECT_LE(std::count(err.begin(), err.end(), '\n'), 2) << err;
  }
  // Missing dataset files.
  fs::path empty = FreshDir("no_data");
  setenv("LOCKSTEP_FASHION_MNIST_DIR", empty.c_str(), 1);
  auto [missing_code, missing_err] = RunCli("train --use_cpu --model lenet --train_data fashion-mnist");
  unsetenv("LOCKSTEP_FASHION_MNIST_DIR");
  EXPECT_EQ(missing_code, 1);
  EXPECT_NE(missing_err.find("cannot open " + (empty / "train-images-idx3-ubyte.gz").string() +
                             ": No such file or directory; LOCKSTEP_FASHION_MNIST_DIR is set to '" +
                             empty.string() + "'"),
            std::string::npos)
      << missing_err;
}

// Ctrl-C stops a one-process run between two steps (a second signal at once is the same request): it saves a
// mid-epoch checkpoint of the last step (whose resumption MidEpochCheckpoints tests), which counts toward
// --keep_checkpoints, says where it stopped, and exits 130 as a shell reports SIGINT.
TEST(TrainerCli, SigintStopsBetweenStepsAndSavesWhereItStopped) {
  fs::path dir = FreshDir("sigint");
  const std::string flags =
      "train --use_cpu --model lenet --train_data null --num_channels 1 --image_size 28 --num_labels 10 "
      "--batch_size 8 --epoch_size 800000 --num_epochs 2 --threads 1 --log_every_iters 1 --save_model_name m "
      "--checkpoint_every_iters 1 --keep_checkpoints 2 --file_store_path " +
      dir.string() + " --log_dir " + dir.string();
  const fs::path output = dir / "output.txt";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string command = "exec " + CliPath() + " " + flags + " > " + output.string() + " 2>&1";
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  auto text = [&] {
    std::ifstream in(output);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  for (int i = 0; i < 1200 && text().find(" iter 1/100000:") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the first step is done
  // Twice at once, as timeout(1) signals its child and then the child's process group: one request.
  ASSERT_EQ(kill(pid, SIGINT), 0);
  ASSERT_EQ(kill(pid, SIGINT), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << text();
  EXPECT_EQ(WEXITSTATUS(status), 130) << text();
  std::smatch match;
  const std::string printed = text();
  ASSERT_TRUE(std::regex_search(
      printed, match,
      std::regex("\nlockstep: stopped by SIGINT \\(Ctrl-C\\) after step ([0-9]+) of 100000 in epoch 1 of 2; "
                 "saved (.*/m_iter0*([0-9]+)\\.safetensors): resume with --load_model_path latest\n$")))
      << printed;
  EXPECT_EQ(match[1], match[3]) << "the first epoch's steps are the job's iterations";
  const std::map<std::string, std::string> metadata = ReadSafetensorsMetadata(match[2]);
  EXPECT_EQ(metadata.at("iteration"), std::string(match[1]));
  EXPECT_EQ(metadata.at("epochs_done"), "0");

  EXPECT_EQ(LatestCheckpoint(dir.string(), "m"), std::string(match[2]))
      << "--load_model_path latest takes it";
  const auto kept = IterationCheckpoints(dir.string(), "m");  // one a step, the newest 2 kept
  ASSERT_EQ(kept.size(), std::min<size_t>(2, std::stoul(match[1].str())));
  EXPECT_EQ(kept.back().second, std::string(match[2]));
}

// LOCKSTEP_MAX_STEPS caps every epoch, says so, and leaves the epochs and their files as they were.
TEST(TrainerCli, MaxStepsCapsEveryEpoch) {
  fs::path dir = FreshDir("max_steps");
  auto flags = [](const fs::path& where) {
    return "train --use_cpu --model lenet --train_data null --num_channels 1 --image_size 28 --num_labels 10 "
           "--batch_size 8 --epoch_size 64 --num_epochs 2 --threads 1 --save_model_name m "
           "--file_store_path " +
           where.string() + " --log_dir " + where.string();
  };
  setenv("LOCKSTEP_MAX_STEPS", "3", 1);
  CliOutput capped = RunCliWithFiles(dir, flags(dir));
  setenv("LOCKSTEP_MAX_STEPS", "0", 1);
  fs::path again = FreshDir("max_steps_refused");  // not over the first run's checkpoints
  CliOutput refused = RunCliWithFiles(again, flags(again));
  unsetenv("LOCKSTEP_MAX_STEPS");
  ASSERT_EQ(capped.code, 0) << capped.err;
  EXPECT_NE(capped.out.find("\nLOCKSTEP_MAX_STEPS=3: 3 steps per epoch instead of 8\n"), std::string::npos)
      << capped.out;
  EXPECT_EQ(ReadSafetensors((dir / "m_2.safetensors").string()).metadata.at("iteration"), "6");
  EXPECT_NE(refused.code, 0);
  EXPECT_EQ(
      refused.err,
      "lockstep: error: LOCKSTEP_MAX_STEPS '0': use a positive number of steps per epoch, or unset it to "
      "train full epochs\n");
}

// `lockstep` alone is a newcomer's first try: it lists the subcommands.
TEST(TrainerCli, BareLockstepListsTheSubcommands) {
  CliOutput run = RunCliWithFiles(FreshDir("bare"), "");
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("Usage: lockstep [OPTIONS] SUBCOMMAND"), std::string::npos) << run.out;
  for (const char* subcommand : {"train", "eval", "make-db", "plot", "launch", "ops"})
    EXPECT_TRUE(std::regex_search(run.out, std::regex(std::string("\n  ") + subcommand + " +[A-Z]")))
        << subcommand << " is not listed:\n"
        << run.out;
}

// A misspelled command or program flag names the nearest one.
TEST(TrainerCli, AMisspelledCommandOrFlagNamesTheNearest) {
  for (const auto& [word, line] : {std::pair{"trian", "unknown command 'trian'; did you mean train?"},
                                   {"--verison", "unknown flag '--verison'; did you mean --version?"}}) {
    CliOutput run = RunCliWithFiles(FreshDir("misspelled"), word);
    EXPECT_EQ(run.code, kExitNotRetryable) << word;
    EXPECT_EQ(run.err, std::string("lockstep: error: ") + line + " (`lockstep --help` lists the commands)\n");
  }
  // A required argument left out says where the usage is.
  CliOutput run = RunCliWithFiles(FreshDir("misspelled"), "plot");
  EXPECT_EQ(run.code, kExitNotRetryable);
  EXPECT_EQ(run.err, "lockstep: error: logs is required (`lockstep plot --help` shows the usage)\n");
}

}  // namespace lockstep::testing
