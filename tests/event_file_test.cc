// TensorBoard event files: CRC-32C and the TFRecord framing, the Event messages as TensorBoard reads them,
// each shard's run folder, and what `lockstep train --tensorboard_dir` writes.
#include "lockstep/train/event_file.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "lockstep/train/training_events.h"
#include "tensorboard.pb.h"
#include "test_util.h"

namespace lockstep::testing {

namespace fs = std::filesystem;

namespace {

// The events of a file, each record's CRCs checked as TensorBoard's reader checks them.
std::vector<tensorboard::Event> ReadEvents(const std::string& path) {
  const std::string bytes = ReadFile(path);
  std::vector<tensorboard::Event> events;
  size_t at = 0;
  while (at < bytes.size()) {
    EXPECT_LE(at + 12, bytes.size()) << "a record's header is cut";
    uint64_t length;
    uint32_t length_crc, data_crc;
    std::memcpy(&length, bytes.data() + at, 8);
    std::memcpy(&length_crc, bytes.data() + at + 8, 4);
    EXPECT_EQ(length_crc, MaskedCrc32c(bytes.data() + at, 8));
    const char* data = bytes.data() + at + 12;
    std::memcpy(&data_crc, data + length, 4);
    EXPECT_EQ(data_crc, MaskedCrc32c(data, length));
    tensorboard::Event event;
    EXPECT_TRUE(event.ParseFromArray(data, static_cast<int>(length)));
    events.push_back(event);
    at += 12 + length + 4;
  }
  EXPECT_EQ(at, bytes.size());
  return events;
}

std::string OnlyFileIn(const fs::path& dir) {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file()) files.push_back(entry.path().string());
  EXPECT_EQ(files.size(), 1u) << dir;
  return files.empty() ? "" : files[0];
}

// tag -> (step -> value) of the scalar events.
std::map<std::string, std::map<int64_t, float>> Scalars(const std::vector<tensorboard::Event>& events) {
  std::map<std::string, std::map<int64_t, float>> scalars;
  for (const auto& event : events)
    for (const auto& value : event.summary().value())
      if (value.value_case() == tensorboard::Summary::Value::kSimpleValue)
        scalars[value.tag()][event.step()] = value.simple_value();
  return scalars;
}

}  // namespace

TEST(EventFile, Crc32cMatchesTheCastagnoliCheckValue) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
  const uint32_t crc = Crc32c("123456789", 9);
  EXPECT_EQ(MaskedCrc32c("123456789", 9), ((crc >> 15) | (crc << 17)) + 0xA282EAD8u);
}

TEST(EventFile, WritesTheVersionThenScalarsAndTextAsFramedRecords) {
  const fs::path dir = FreshDir("event_file") / "run";  // created by the writer
  std::string path;
  {
    EventFile events(dir.string());
    path = events.path();
    EXPECT_EQ(fs::path(path).parent_path(), dir);
    EXPECT_EQ(fs::path(path).filename().string().rfind("events.out.tfevents.", 0), 0u) << path;
    events.Scalar("train/loss", 3, 0.25);
    events.Text("options", 0, "| option | value |");
    // Each record is flushed as written: a reader sees it while the run goes on.
    EXPECT_EQ(ReadEvents(path).size(), 3u);
  }
  auto events = ReadEvents(path);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_EQ(events[1].step(), 3);
  ASSERT_EQ(events[1].summary().value_size(), 1);
  EXPECT_EQ(events[1].summary().value(0).tag(), "train/loss");
  EXPECT_EQ(events[1].summary().value(0).simple_value(), 0.25f);
  EXPECT_GT(events[1].wall_time(), 1.7e9);
  const auto& text = events[2].summary().value(0);
  EXPECT_EQ(text.tag(), "options");
  EXPECT_EQ(text.metadata().plugin_data().plugin_name(), "text");
  EXPECT_EQ(text.tensor().dtype(), 7);  // DT_STRING
  ASSERT_EQ(text.tensor().string_val_size(), 1);
  EXPECT_EQ(text.tensor().string_val(0), "| option | value |");
}

TEST(EventFile, AnUnwritableFolderIsAnIoError) {
  const fs::path file = FreshDir("event_file_blocked") / "a_file";
  std::ofstream(file) << "not a folder";
  EXPECT_THROW(EventFile((file / "run").string()), IoError);
}

TEST(EventFile, EachShardHasItsRunFolderUnlessOnlyShardZeroWrites) {
  TrainerConfig config;
  EXPECT_EQ(TensorBoardRunDir(config), "");
  config.tensorboard_dir = "tb";
  EXPECT_EQ(TensorBoardRunDir(config), "tb");
  config.num_shards = 3;
  config.shard_id = 2;
  EXPECT_EQ(TensorBoardRunDir(config), "tb/shard2");
  config.tensorboard_shard0_only = true;
  EXPECT_EQ(TensorBoardRunDir(config), "");
  config.shard_id = 0;
  EXPECT_EQ(TensorBoardRunDir(config), "tb");
}

// 2 epochs of 8 steps of LeNet on synthetic data with a row after every step: the event file holds the same
// figures as the --iter_log rows, the epochs' figures and the options.
TEST(EventFile, TrainingWritesTheRowsTheEpochsAndTheOptions) {
  const fs::path dir = FreshDir("event_file_train");
  const std::string iter_log = (dir / "iter.csv").string();
  CliOutput run = RunCliWithFiles(
      dir, "train --use_cpu --model lenet --train_data null --num_channels 1 --image_size 28 --num_labels 10 "
           "--batch_size 8 --epoch_size 64 --num_epochs 2 --threads 1 --base_learning_rate 0.05 "
           "--log_every_iters 1 --log_dir " +
               dir.string() + " --iter_log " + iter_log + " --tensorboard_dir " + (dir / "tb").string());
  ASSERT_EQ(run.code, 0) << run.err;
  const std::string path = OnlyFileIn(dir / "tb");
  EXPECT_NE(run.out.find("TensorBoard events: " + path), std::string::npos) << run.out;
  const auto events = ReadEvents(path);
  const auto scalars = Scalars(events);

  // unix_time,elapsed_seconds,epoch,iteration,iterations,inputs_per_sec,loss,accuracy,learning_rate,...
  std::istringstream rows(ReadFile(iter_log));
  std::string row;
  std::getline(rows, row);  // the header
  int count = 0;
  while (std::getline(rows, row)) {
    std::vector<std::string> cells;
    std::stringstream split(row);
    for (std::string cell; std::getline(split, cell, ',');) cells.push_back(cell);
    const int64_t step = (std::stoll(cells[2]) - 1) * 8 + std::stoll(cells[3]);
    EXPECT_EQ(step, ++count);
    EXPECT_NEAR(scalars.at("train/loss").at(step), std::stod(cells[6]), 1e-6);
    EXPECT_NEAR(scalars.at("train/accuracy").at(step), std::stod(cells[7]), 1e-6);
    EXPECT_NEAR(scalars.at("train/learning_rate").at(step), std::stod(cells[8]), 1e-6);
    EXPECT_GT(scalars.at("train/images_per_sec").at(step), 0);
  }
  EXPECT_EQ(count, 16);
  for (const char* tag : {"train/loss", "train/accuracy", "train/learning_rate", "train/images_per_sec",
                          "train/epoch_eta_seconds", "train/run_eta_seconds"})
    EXPECT_EQ(scalars.at(tag).size(), 16u) << tag;
  for (const char* tag : {"epoch/loss", "epoch/accuracy", "epoch/images_per_sec", "epoch/learning_rate"}) {
    ASSERT_EQ(scalars.at(tag).size(), 2u) << tag;
    EXPECT_EQ(scalars.at(tag).begin()->first, 8);
    EXPECT_EQ(scalars.at(tag).rbegin()->first, 16);
  }
  EXPECT_EQ(scalars.at("epoch/loss").at(16), scalars.at("train/loss").at(16));
  EXPECT_EQ(scalars.count("epoch/test_accuracy"), 0u);  // no test data

  const auto& options = events.at(1).summary().value(0);
  EXPECT_EQ(options.tag(), "options");
  EXPECT_NE(options.tensor().string_val(0).find("| model | lenet |"), std::string::npos);
  EXPECT_NE(options.tensor().string_val(0).find("| batch_size | 8 |"), std::string::npos);
}

TEST(EventFile, ShardZeroOnlyNeedsAFolder) {
  const fs::path dir = FreshDir("event_file_refused");
  CliOutput run = RunCliWithFiles(dir, "train --use_cpu --model lenet --train_data null --tensorboard_shard0_only");
  EXPECT_NE(run.code, 0);
  EXPECT_NE(run.err.find("--tensorboard_shard0_only needs --tensorboard_dir"), std::string::npos) << run.err;
}

}  // namespace lockstep::testing
