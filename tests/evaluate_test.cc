// `lockstep eval` and EvaluateCheckpoint: a trained LeNet's checkpoint evaluated on Fashion-MNIST's test set
// agrees with the trainer's last test accuracy on any number of devices, leaves the checkpoint untouched, and
// predicts every image as an independent numpy LeNet does; bad input is one line and a non-zero exit.
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "lockstep/data/idx_dataset.h"
#include "lockstep/train/safetensors.h"
#include "lockstep/train/trainer.h"
#include "test_util.h"

namespace lockstep::testing {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> Split(const std::string& line, char separator = ',') {
  std::vector<std::string> fields;
  std::stringstream stream(line);
  for (std::string field; std::getline(stream, field, separator);) fields.push_back(field);
  return fields;
}

TrainerConfig EvalConfig(const std::string& checkpoint, int devices, int batch_size) {
  TrainerConfig config;
  config.model = "lenet";
  config.test_data = "fashion-mnist";
  config.num_channels = 1;
  config.image_size = 28;
  config.num_labels = 10;
  config.num_devices = devices;
  config.batch_size = batch_size;
  config.threads = 1;
  config.load_model_path = checkpoint;
  return config;
}

// One short LeNet run with test data, shared by the tests: 2 epochs of 6400 images (test accuracy about 0.7),
// evaluated after each on the 10000 test images (a batch of 64 leaves a tail of 16).
class EvaluateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!HaveFashionMnist()) return;
    dir_ = new fs::path(fs::path(::testing::TempDir()) / "lockstep_evaluate");
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    TrainerConfig config;
    config.model = "lenet";
    config.train_data = "fashion-mnist";
    config.test_data = "fashion-mnist";
    config.num_channels = 1;
    config.image_size = 28;
    config.num_labels = 10;
    config.batch_size = 64;
    config.epoch_size = 6400;
    config.num_epochs = 2;
    config.base_learning_rate = 0.1f;
    config.momentum = 0.9f;
    config.weight_decay = 0;
    config.threads = 2;
    config.log_dir = dir_->string();
    config.file_store_path = dir_->string();
    config.save_model_name = "lenet";
    trained_ = new TrainerResult(Train(config));
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete trained_;
    dir_ = nullptr;
    trained_ = nullptr;
  }
  void SetUp() override {
    if (!HaveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  static std::string Checkpoint() { return (*dir_ / "lenet_2.safetensors").string(); }

  static fs::path* dir_;
  static TrainerResult* trained_;
};

fs::path* EvaluateTest::dir_ = nullptr;
TrainerResult* EvaluateTest::trained_ = nullptr;

}  // namespace

TEST_F(EvaluateTest, MatchesTheTrainersLastTestAccuracyOnAnyDeviceCountAndLeavesTheCheckpoint) {
  const std::string before = ReadFile(Checkpoint());
  ASSERT_FALSE(before.empty());
  EvaluationResult one = EvaluateCheckpoint(EvalConfig(Checkpoint(), 1, 64));
  EXPECT_EQ(one.records, 10000);
  EXPECT_EQ(one.top1(), trained_->last_test_accuracy) << "the trainer evaluates the same way";
  std::string last_row;
  for (const std::string& line : Split(ReadFile(trained_->log_path), '\n')) last_row = line;
  EXPECT_EQ(Split(last_row).back(), fmt::format("{:.6f}", one.top1())) << last_row;
  EXPECT_GT(one.top1(), 0.5);
  EXPECT_GE(one.top5(), one.top1());
  EXPECT_GT(one.loss(), 0);
  fmt::print("1 device: loss {:.6f}, top-1 {:.6f}, top-5 {:.6f}; trainer's test_accuracy {:.6f}\n",
             one.loss(), one.top1(), one.top5(), trained_->last_test_accuracy);

  // 2 devices split each batch; 3 devices with a batch of 96 leave a tail of 16 that is padded to 3 x 6.
  for (auto [devices, batch] : {std::pair{2, 64}, std::pair{3, 96}, std::pair{1, 500}}) {
    EvaluationResult other = EvaluateCheckpoint(EvalConfig(Checkpoint(), devices, batch));
    EXPECT_EQ(other.records, 10000) << devices << " devices";
    EXPECT_EQ(other.top1_correct, one.top1_correct) << devices << " devices";
    EXPECT_EQ(other.top5_correct, one.top5_correct) << devices << " devices";
    EXPECT_NEAR(other.loss(), one.loss(), 1e-6) << devices << " devices";
  }
  EXPECT_EQ(ReadFile(Checkpoint()), before) << "evaluation must not write the checkpoint";
}

TEST_F(EvaluateTest, CliPredictionsAgreeWithAnIndependentNumpyLeNet) {
  const fs::path& dir = *dir_;
  const std::string before = ReadFile(Checkpoint());
  const fs::path predictions = dir / "predictions.csv";
  CliOutput run =
      RunCliWithFiles(dir,
                      "eval --use_cpu --num_gpus 2 --threads 2 --model lenet --test_data fashion-mnist "
                      "--batch_size 64 --load_model_path " +
                          Checkpoint() + " --predictions " + predictions.string());
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find(fmt::format("top-1 accuracy {:.6f}", trained_->last_test_accuracy)),
            std::string::npos)
      << run.out;
  EXPECT_EQ(ReadFile(Checkpoint()), before);
  for (const auto& entry : fs::directory_iterator(dir))
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << "left behind: " << entry.path();

  const fs::path reference = dir / "reference.csv";
  if (std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0) GTEST_SKIP() << "no numpy";
  std::string script = SourceDir() + "/tests/lenet_reference.py";
  std::string command = "/usr/bin/python3 " + script + " " + Checkpoint() + " " + FashionMnistDir() + " " +
                        reference.string() + " > " + (dir / "python.txt").string() + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << ReadFile(dir / "python.txt");

  std::vector<std::string> ours = Split(ReadFile(predictions), '\n');
  std::vector<std::string> theirs = Split(ReadFile(reference), '\n');
  ASSERT_EQ(ours.size(), 10001u);
  ASSERT_EQ(theirs.size(), 10001u);
  EXPECT_EQ(ours[0], "key,label,predicted_class,score");
  std::map<int, std::vector<std::string>> by_key;  // every test image exactly once
  for (size_t i = 1; i < ours.size(); ++i) {
    std::vector<std::string> row = Split(ours[i]);
    ASSERT_EQ(row.size(), 4u) << ours[i];
    EXPECT_TRUE(by_key.emplace(std::stoi(row[0]), row).second) << "repeated: " << ours[i];
  }
  ASSERT_EQ(by_key.size(), 10000u);
  int agree = 0;
  double max_score_difference = 0;
  for (size_t i = 1; i < theirs.size(); ++i) {
    std::vector<std::string> expected = Split(theirs[i]);  // index,label,predicted_class,score,margin
    const std::vector<std::string>& actual = by_key.at(std::stoi(expected[0]));
    EXPECT_EQ(actual[1], expected[1]) << "label of image " << expected[0];
    // float32 against float64 logits differ by ~1e-6 here; a class may differ only on a closer tie.
    if (actual[2] == expected[2])
      ++agree;
    else
      EXPECT_LT(std::stod(expected[4]), 1e-4) << "image " << expected[0] << ": " << ours[i];
    double difference = std::abs(std::stod(actual[3]) - std::stod(expected[3]));
    max_score_difference = std::max(max_score_difference, difference);
    EXPECT_LE(difference, 1e-4) << "image " << expected[0];
  }
  fmt::print("predicted classes agree on {} of 10000 images; largest score difference {:.3g}\n", agree,
             max_score_difference);
  EXPECT_EQ(agree, 10000);
}

// The checkpoint records its model and geometry: eval needs neither --model nor the geometry flags, and gives
// the same figures as with them. One from before the geometry was recorded, or without even the model's name,
// still evaluates with the flags.
TEST_F(EvaluateTest, TheCheckpointNamesItsModelAndOlderOnesTakeTheFlags) {
  const fs::path& dir = *dir_;
  const std::string eval = "eval --use_cpu --threads 2 --test_data fashion-mnist --batch_size 64 ";
  const std::string model_flags = "--model lenet --num_channels 1 --image_size 28 --num_labels 10 ";
  CliOutput alone = RunCliWithFiles(dir, eval + "--load_model_path " + Checkpoint());
  ASSERT_EQ(alone.code, 0) << alone.err;
  EXPECT_NE(alone.out.find(fmt::format("top-1 accuracy {:.6f}", trained_->last_test_accuracy)),
            std::string::npos)
      << alone.out;
  CliOutput flagged = RunCliWithFiles(dir, eval + model_flags + "--load_model_path " + Checkpoint());
  ASSERT_EQ(flagged.code, 0) << flagged.err;
  EXPECT_EQ(alone.out, flagged.out);

  const std::string older = (dir / "older.safetensors").string();
  SafetensorsFile file = ReadSafetensors(Checkpoint());
  std::map<std::string, const Tensor*> tensors;
  for (const auto& [name, tensor] : file.tensors) tensors[name] = &tensor;
  for (const char* key : {"num_channels", "image_size", "num_labels"}) file.metadata.erase(key);
  WriteSafetensors(older, tensors, file.metadata);
  CliOutput without_geometry = RunCliWithFiles(dir, eval + model_flags + "--load_model_path " + older);
  ASSERT_EQ(without_geometry.code, 0) << without_geometry.err;
  EXPECT_EQ(without_geometry.out, flagged.out);

  file.metadata.erase("model");
  WriteSafetensors(older, tensors, file.metadata);
  CliOutput unnamed = RunCliWithFiles(dir, eval + "--load_model_path " + older);
  EXPECT_NE(unnamed.code, 0) << "the default model, resnet50, does not take 28x28 images";
  unnamed = RunCliWithFiles(dir, eval + "--model lenet --load_model_path " + older);
  ASSERT_EQ(unnamed.code, 0) << unnamed.err;
  EXPECT_EQ(unnamed.out, flagged.out);
}

TEST_F(EvaluateTest, BadInputGivesOneLineAndNonZeroExit) {
  const fs::path& dir = *dir_;
  const std::string base = "eval --use_cpu --model lenet --test_data fashion-mnist ";
  // A checkpoint of another model: a ResNet-18 with the same input, saved after one short epoch.
  TrainerConfig other;
  other.model = "resnet18";
  other.train_data = "null";
  other.num_channels = 1;
  other.image_size = 32;
  other.num_labels = 10;
  other.batch_size = 2;
  other.epoch_size = 2;
  other.threads = 1;
  other.log_dir = dir.string();
  other.file_store_path = dir.string();
  other.save_model_name = "resnet18";
  Train(other);
  const std::string resnet = (dir / "resnet18_1.safetensors").string();
  struct Case {
    std::string arguments, message;
  } cases[] = {
      {base, "--load_model_path is required"},
      {base + "--load_model_path /nonexistent/x.safetensors", "/nonexistent/x.safetensors"},
      {base + "--load_model_path " + resnet,
       "--model lenet contradicts the checkpoint " + resnet +
           ", which holds resnet18; drop --model or load a lenet checkpoint"},
      {"eval --use_cpu --model lenet --load_model_path " + Checkpoint(), "--test_data is required"},
      {"eval --use_cpu --model lenet --test_data null --load_model_path " + Checkpoint(),
       "--test_data null has no labels to score"},
      {base + "--load_model_path latest", "--load_model_path latest finds where training resumes"},
      {base + "--load_model_path " + Checkpoint() + " --predictions " + dir.string(),
       "--predictions '" + dir.string() + "' is a directory; name the file to write"},
      {"eval --use_cpu --model lenet --test_data " + (dir / "no_such_db").string() + " --load_model_path " +
           Checkpoint(),
       "no_such_db"},
      {base + "--image_size 32 --load_model_path " + Checkpoint(), "does not match fashion-mnist"},
      {base + "--num_gpus 3 --batch_size 64 --load_model_path " + Checkpoint(),
       "--batch_size 64 does not divide evenly among 3 replicas"},
  };
  for (const auto& c : cases) {
    CliOutput run = RunCliWithFiles(dir, c.arguments);
    EXPECT_NE(run.code, 0) << c.arguments;
    EXPECT_NE(run.err.find(c.message), std::string::npos) << c.arguments << "\nstderr: " << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  }
}

}  // namespace lockstep::testing
