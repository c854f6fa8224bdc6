// The network a checkpoint describes in its metadata (model, channels, image size, labels): training records
// it, resume (a path or `latest`, from `lockstep train` and resnet50_trainer) and eval build it without
// flags, a flag or data that contradicts it is refused in one line before any work, and a checkpoint without
// the geometry (written before lockstep recorded it) still loads with flags.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "lockstep/core/enforce.h"
#include "lockstep/train/checkpoint.h"
#include "lockstep/train/safetensors.h"
#include "lockstep/train/trainer.h"
#include "synthetic_lenet.h"
#include "test_util.h"

namespace lockstep::testing {

namespace fs = std::filesystem;

namespace {

// LeNet on synthetic 3-channel 32x32 images of 7 classes, one epoch of 12 steps: a geometry that is neither
// fashion-mnist's nor the flags' defaults, so that only the checkpoint can supply it. Returns m_1's path.
std::string TrainLeNet(const fs::path& dir) {
  TrainerConfig config = SyntheticLeNet(dir.string());
  config.num_channels = 3;
  config.image_size = 32;
  config.num_labels = 7;
  config.num_epochs = 1;
  Train(config);
  return (dir / "m_1.safetensors").string();
}

// The flags of `train` that resuming TrainLeNet's run needs besides the model's, to `num_epochs`.
std::string ResumeFlags(const fs::path& dir, int num_epochs) {
  return fmt::format(
      "train --use_cpu --train_data null --batch_size 8 --epoch_size 96 --threads 1 --num_epochs {} "
      "--save_model_name m --file_store_path {} --log_dir {} ",
      num_epochs, dir.string(), dir.string());
}

// Rewrites the checkpoint with the metadata entries of `changes` set, or removed where the value is "".
void EditMetadata(const std::string& path, const std::map<std::string, std::string>& changes) {
  SafetensorsFile file = ReadSafetensors(path);
  for (const auto& [key, value] : changes) {
    if (value.empty())
      file.metadata.erase(key);
    else
      file.metadata[key] = value;
  }
  std::map<std::string, const Tensor*> tensors;
  for (const auto& [name, tensor] : file.tensors) tensors[name] = &tensor;
  WriteSafetensors(path, tensors, file.metadata);
}

// What the CLI prints on stderr for a refusal: the message on one line.
std::string ErrorLine(const std::string& message) { return "lockstep: error: " + message + "\n"; }

void ExpectModel(const std::string& path, const std::string& name, int channels, int image_size, int labels) {
  const ModelDescription model = ReadModelDescription(path);
  EXPECT_EQ(model.name, name) << path;
  EXPECT_EQ(model.num_channels, channels) << path;
  EXPECT_EQ(model.image_size, image_size) << path;
  EXPECT_EQ(model.num_labels, labels) << path;
}

}  // namespace

TEST(CheckpointModel, TrainingRecordsTheModelAndItsGeometry) {
  const fs::path dir = FreshDir("checkpoint_model_recorded");
  const std::string path = TrainLeNet(dir);
  auto metadata = ReadSafetensorsMetadata(path);
  EXPECT_EQ(metadata["model"], "lenet");
  EXPECT_EQ(metadata["num_channels"], "3");
  EXPECT_EQ(metadata["image_size"], "32");
  EXPECT_EQ(metadata["num_labels"], "7");
  EXPECT_EQ(metadata.count("scale"), 0u) << "synthetic images are not resized";
  ExpectModel(path, "lenet", 3, 32, 7);

  // The resize before the crop is the checkpoint's too: eval and export bring images to the size it saw.
  EditMetadata(path, {{"scale", "40"}});
  TrainerConfig eval;
  eval.load_model_path = path;
  ResolveModelFromCheckpoint({}, /*train=*/false, &eval);
  EXPECT_EQ(eval.scale, 40);
  EXPECT_EQ(eval.image_size, 32);
}

TEST(CheckpointModel, ResumeBuildsTheCheckpointsModelWithoutModelFlags) {
  const fs::path dir = FreshDir("checkpoint_model_resume");
  const std::string first = TrainLeNet(dir);
  // Without --model the default is resnet50 at 224x224 with 1000 labels: the checkpoint's LeNet is built.
  CliOutput run = RunCliWithFiles(dir, ResumeFlags(dir, 2) + "--load_model_path " + first);
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(ReadSafetensorsMetadata((dir / "m_2.safetensors").string())["iteration"], "24");
  ExpectModel((dir / "m_2.safetensors").string(), "lenet", 3, 32, 7);

  run = RunCliWithFiles(dir, ResumeFlags(dir, 3) + "--load_model_path latest");
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("resuming from " + (dir / "m_2.safetensors").string()), std::string::npos)
      << run.out;
  ExpectModel((dir / "m_3.safetensors").string(), "lenet", 3, 32, 7);

  // resnet50_trainer's own default model gives way to the checkpoint's too.
  const fs::path trainer = fs::path(CliPath()).parent_path() / "resnet50_trainer";
  if (!fs::exists(trainer)) GTEST_SKIP() << "no resnet50_trainer beside " << CliPath();
  const std::string flags = ResumeFlags(dir, 4).substr(std::string("train ").size());
  const std::string command = trainer.string() + " " + flags + "--load_model_path latest > " +
                              (dir / "trainer.txt").string() + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << ReadFile(dir / "trainer.txt");
  ExpectModel((dir / "m_4.safetensors").string(), "lenet", 3, 32, 7);
}

TEST(CheckpointModel, ResumeRefusesAContradictingFlagOrDataBeforeTraining) {
  const fs::path dir = FreshDir("checkpoint_model_resume_refused");
  const std::string path = TrainLeNet(dir);
  const std::string flags = ResumeFlags(dir, 2);
  struct Case {
    std::string arguments, message;
  } cases[] = {
      {flags + "--model resnet18 --load_model_path " + path,
       "--model resnet18 contradicts the checkpoint " + path +
           ", which holds lenet; drop --model or load a resnet18 checkpoint"},
      {flags + "--image_size 28 --load_model_path " + path,
       "--image_size 28 contradicts the checkpoint " + path +
           ", which holds 32; drop --image_size or load a checkpoint of --image_size 28"},
      {flags + "--model lenet --num_labels 10 --load_model_path latest",
       "--num_labels 10 contradicts the checkpoint " + path +
           ", which holds 7; drop --num_labels or load a checkpoint of --num_labels 10"},
      {flags + "--train_data fashion-mnist --load_model_path " + path,
       "--train_data fashion-mnist has --num_channels 1 but the checkpoint " + path +
           " holds 3; give data of the checkpoint's geometry"},
  };
  for (const Case& c : cases) {
    CliOutput run = RunCliWithFiles(dir, c.arguments);
    EXPECT_EQ(run.code, kExitNotRetryable) << c.arguments;
    EXPECT_EQ(run.err, ErrorLine(c.message)) << c.arguments;
    EXPECT_EQ(run.out, "") << "nothing ran before the refusal: " << c.arguments;
  }
  EXPECT_FALSE(fs::exists(dir / "m_2.safetensors"));

  // A flag that agrees with the checkpoint is accepted.
  CliOutput run = RunCliWithFiles(dir, flags + "--model lenet --image_size 32 --load_model_path " + path);
  EXPECT_EQ(run.code, 0) << run.err;
}

TEST(CheckpointModel, EvalRefusesAContradictingFlagOrData) {
  const fs::path dir = FreshDir("checkpoint_model_eval_refused");
  const std::string path = TrainLeNet(dir);
  // The refusal comes before the test data is opened: a database that does not exist shows it.
  const std::string eval = "eval --use_cpu --test_data " + (dir / "no_such_db").string() + " ";
  struct Case {
    std::string arguments, message;
  } cases[] = {
      {eval + "--model resnet50 --load_model_path " + path,
       "--model resnet50 contradicts the checkpoint " + path +
           ", which holds lenet; drop --model or load a resnet50 checkpoint"},
      {eval + "--num_channels 1 --load_model_path " + path,
       "--num_channels 1 contradicts the checkpoint " + path +
           ", which holds 3; drop --num_channels or load a checkpoint of --num_channels 1"},
      {"eval --use_cpu --test_data fashion-mnist --load_model_path " + path,
       "--test_data fashion-mnist has --num_channels 1 but the checkpoint " + path +
           " holds 3; give data of the checkpoint's geometry"},
  };
  for (const Case& c : cases) {
    CliOutput run = RunCliWithFiles(dir, c.arguments);
    EXPECT_EQ(run.code, kExitNotRetryable) << c.arguments;
    EXPECT_EQ(run.err, ErrorLine(c.message)) << c.arguments;
  }
  // Flags that agree pass, to the missing database.
  CliOutput run = RunCliWithFiles(dir, eval + "--model lenet --image_size 32 --load_model_path " + path);
  EXPECT_NE(run.code, 0);
  EXPECT_EQ(run.err.find("contradicts"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("no_such_db"), std::string::npos) << run.err;

  // A model trained on fashion-mnist (pixel / 255) would score wrongly on a database's (pixel - 128) / 128.
  const std::string scaled = (dir / "scaled.safetensors").string();
  fs::copy_file(path, scaled);
  EditMetadata(scaled, {{"input_scaling", "pixel / 255"}});
  run = RunCliWithFiles(dir, eval + "--load_model_path " + scaled);
  EXPECT_EQ(run.code, kExitNotRetryable);
  EXPECT_EQ(run.err, ErrorLine("--test_data " + (dir / "no_such_db").string() +
                               " is read as (pixel - 128) / 128, but the checkpoint " + scaled +
                               " was trained on images read as pixel / 255: give data read the same way"));
}

TEST(CheckpointModel, ACheckpointWithoutGeometryResumesWithFlagsAndThenRecordsIt) {
  const fs::path dir = FreshDir("checkpoint_model_no_geometry");
  const std::string path = TrainLeNet(dir);
  EditMetadata(path, {{"num_channels", ""}, {"image_size", ""}, {"num_labels", ""}, {"scale", ""}});
  ExpectModel(path, "lenet", 0, 0, 0);

  // Without them the defaults (3 channels of 224x224, 1000 labels) build a LeNet of other shapes.
  CliOutput run = RunCliWithFiles(dir, ResumeFlags(dir, 2) + "--load_model_path " + path);
  EXPECT_EQ(run.code, kExitNotRetryable);
  EXPECT_NE(run.err.find("but the model has"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("; the checkpoint records no geometry: pass the --num_channels, --image_size and "
                         "--num_labels (or --test_data) it was trained with\n"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;

  run = RunCliWithFiles(
      dir, ResumeFlags(dir, 2) + "--num_channels 3 --image_size 32 --num_labels 7 --load_model_path " + path);
  ASSERT_EQ(run.code, 0) << run.err;
  ExpectModel((dir / "m_2.safetensors").string(), "lenet", 3, 32, 7);
}

TEST(CheckpointModel, AnUnknownModelOrABadGeometryEntryIsOneLine) {
  const fs::path dir = FreshDir("checkpoint_model_bad_metadata");
  const std::string path = TrainLeNet(dir);
  struct Case {
    std::map<std::string, std::string> metadata;
    std::string message;
  } cases[] = {
      {{{"model", "lenet9"}},
       "checkpoint " + path +
           " holds model 'lenet9', which this build does not know (it knows lenet, resnet18, resnet34, "
           "resnet50, resnet101, wrn-<depth>-<width>): load a checkpoint of one of those"},
      {{{"model", "lenet"}, {"image_size", "large"}},
       "checkpoint " + path + ": metadata 'image_size' is not an integer: 'large'"},
      {{{"image_size", "0"}},
       "checkpoint " + path + ": metadata 'image_size' is not a positive integer: '0'"},
  };
  for (const Case& c : cases) {
    EditMetadata(path, c.metadata);
    for (const std::string& command :
         {ResumeFlags(dir, 2), std::string("eval --use_cpu --test_data null ")}) {
      CliOutput run = RunCliWithFiles(dir, command + "--load_model_path " + path);
      EXPECT_EQ(run.code, kExitNotRetryable) << command;
      EXPECT_EQ(run.err, ErrorLine(c.message)) << command;
    }
  }
}

}  // namespace lockstep::testing
