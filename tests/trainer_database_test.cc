// The trainer and eval on image databases: JPEG records, LevelDB, bad records, the --scale warning and the
// geometry and color order a checkpoint records.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

#include "lockstep/data/db.h"
#include "lockstep/data/image.h"
#include "lockstep/data/image_geometry.h"
#include "lockstep/data/image_record.h"
#include "lockstep/train/safetensors.h"
#include "test_util.h"

namespace lockstep::testing {

namespace fs = std::filesystem;

// A LMDB of `count` encoded 40x36 JPEGs (Caffe Datum records) with labels i % 10; `bad_label` makes record
// 3's label that number.
std::string WriteJpegDb(const fs::path& dir, int count, int bad_label = -1, const std::string& type = "lmdb",
                        bool garbage_record = false) {
  std::string path = (dir / ("jpegs_" + type)).string();
  auto db = OpenDB(type, path, DbMode::kNew);
  auto transaction = db->NewTransaction();
  for (int i = 0; i < count; ++i) {
    Image image;
    image.height = 36;
    image.width = 40;
    image.channels = 3;
    image.pixels.resize(36 * 40 * 3);
    for (size_t p = 0; p < image.pixels.size(); ++p)
      image.pixels[p] = static_cast<uint8_t>((p * (i + 3)) % 251);
    ImageRecord record;
    record.label = i == 3 && bad_label >= 0 ? bad_label : i % 10;
    record.encoded = true;
    record.bytes = EncodeJpeg(image, 90);
    transaction->Put(fmt::format("{:08d}", i), MakeDatum(record));
  }
  if (garbage_record) transaction->Put("garbage", "not a Datum");
  transaction->Commit();
  return path;
}

// The trainer on a database of JPEGs: 2 devices, test evaluation, the log and a checkpoint per epoch.
TEST(TrainerCli, TrainsFromAnImageDatabase) {
  fs::path dir = FreshDir("jpeg_db");
  std::string db = WriteJpegDb(dir, 32);
  auto [code, out, err] = RunCliWithFiles(
      dir,
      fmt::format("train --use_cpu --model lenet --train_data {0} --test_data {0} --num_channels 3 "
                  "--image_size 28 --scale 32 "
                  "--num_labels 10 --num_gpus 2 --batch_size 8 --epoch_size 32 --num_epochs 2 --threads 2 "
                  "--save_model_name m --file_store_path {1} --log_dir {1}",
                  db, dir.string()));
  ASSERT_EQ(code, 0) << err;
  EXPECT_TRUE(fs::exists(dir / "m_1.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "m_2.safetensors"));
  std::vector<fs::path> logs;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".log") logs.push_back(entry.path());
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_TRUE(std::regex_match(logs[0].filename().string(),
                               std::regex(R"(lenet_gpu2_b8_L10_lr0\.10_v2_\d{8}_\d{6}\.log)")))
      << logs[0];
  std::smatch last_row;  // the log's header lines, then a row per epoch
  const std::string log = ReadFile(logs[0]);
  ASSERT_EQ(std::count(log.begin(), log.end(), '\n'), 4) << log;
  std::regex row(R"(\n[\d.]+,[\d.]+,32,64,8,[\d.]+,[\d.]+,2,0\.1,[\d.]+,0\.\d+\n$)");
  EXPECT_TRUE(std::regex_search(log, row)) << log;
}

// eval reads a LevelDB, which opens once at a time, as its only data, as training read it: a --scale below
// --image_size resizes to --image_size, which the checkpoint records with the color order.
TEST(TrainerCli, EvalReadsALevelDbAsTrainingReadIt) {
  fs::path dir = FreshDir("eval_leveldb");
  const std::string db = WriteJpegDb(dir, 16, -1, "leveldb");
  const std::string data =
      " --db_type leveldb --num_channels 3 --image_size 28 --num_labels 10 --batch_size 8 ";
  const std::string checkpoint = (dir / "m_1.safetensors").string();
  CliOutput trained =
      RunCliWithFiles(dir, "train --use_cpu --model lenet --train_data " + db + data +
                               "--scale 0 --color_order rgb --epoch_size 16 --save_model_name m "
                               "--file_store_path " +
                               dir.string() + " --log_dir " + dir.string());
  ASSERT_EQ(trained.code, 0) << trained.err;
  EXPECT_EQ(ReadSafetensorsMetadata(checkpoint).at("scale"), "28");
  EXPECT_EQ(ReadSafetensorsMetadata(checkpoint).at("color_order"), "rgb");
  const std::string eval = "eval --use_cpu --load_model_path " + checkpoint + " --test_data " + db + data;
  CliOutput evaluated = RunCliWithFiles(dir, eval);
  ASSERT_EQ(evaluated.code, 0) << evaluated.err;
  EXPECT_NE(evaluated.out.find("16 records: loss "), std::string::npos) << evaluated.out;
  EXPECT_EQ(evaluated.err, "");  // no warning of a --scale 256 that enlarges the images
  CliOutput other_order = RunCliWithFiles(dir, eval + "--color_order bgr");
  EXPECT_EQ(other_order.code, kExitNotRetryable);
  EXPECT_EQ(other_order.err, "lockstep: error: --color_order bgr contradicts the checkpoint " + checkpoint +
                                 ", trained on rgb images; drop --color_order or pass rgb\n");
}

// With --skip_bad_records, evaluation leaves a bad record out and counts every good one once; the trainer's
// test pass and eval agree.
TEST(TrainerCli, EvaluationLeavesBadRecordsOut) {
  fs::path dir = FreshDir("eval_bad_records");
  const std::string db = WriteJpegDb(dir, 8, -1, "lmdb", /*garbage_record=*/true);
  const std::string data = " --num_channels 3 --image_size 28 --scale 36 --num_labels 10 --batch_size 4 ";
  const std::string checkpoint = (dir / "m_1.safetensors").string();
  CliOutput trained = RunCliWithFiles(dir, "train --use_cpu --model lenet --skip_bad_records --train_data " +
                                               db + " --test_data " + db + data +
                                               "--epoch_size 8 --save_model_name m --file_store_path " +
                                               dir.string() + " --log_dir " + dir.string());
  ASSERT_EQ(trained.code, 0) << trained.err;
  std::smatch test_accuracy;
  ASSERT_TRUE(std::regex_search(trained.out, test_accuracy, std::regex("test accuracy ([0-9.]+)")))
      << trained.out;
  const std::string eval = "eval --use_cpu --load_model_path " + checkpoint + " --test_data " + db + data;
  CliOutput refused = RunCliWithFiles(dir, eval);
  EXPECT_EQ(refused.code, kExitNotRetryable);
  EXPECT_NE(refused.err.find("record 'garbage'"), std::string::npos) << refused.err;
  CliOutput evaluated = RunCliWithFiles(dir, eval + "--skip_bad_records");
  ASSERT_EQ(evaluated.code, 0) << evaluated.err;
  std::smatch counted;
  ASSERT_TRUE(
      std::regex_search(evaluated.out, counted, std::regex("^8 records: .* top-1 accuracy ([0-9.]+) \\(")))
      << evaluated.out;
  EXPECT_NEAR(std::stod(counted[1]), std::stod(test_accuracy[1]), 1e-4);
  EXPECT_NE(evaluated.out.find("\nleft out 1 bad record (--skip_bad_records)\n"), std::string::npos)
      << evaluated.out;

  // A database of bad records only has nothing to score.
  const std::string all_bad = (dir / "all_bad").string();
  {
    auto bad_db = OpenDB("lmdb", all_bad, DbMode::kNew);
    auto transaction = bad_db->NewTransaction();
    transaction->Put("a", "not a Datum");
    transaction->Put("b", "nor this");
    transaction->Commit();
  }
  CliOutput nothing = RunCliWithFiles(dir, "eval --use_cpu --load_model_path " + checkpoint + " --test_data " +
                                               all_bad + data + "--skip_bad_records");
  EXPECT_EQ(nothing.code, kExitNotRetryable);
  EXPECT_NE(nothing.err.find("none of the 2 records of the test data can be used (--skip_bad_records left "
                             "each out)"),
            std::string::npos)
      << nothing.err;
}

// One pass over a database smaller than the batch has no step: the message names the database, not a flag
// value the user never gave.
TEST(TrainerCli, OnePassSmallerThanTheBatchNamesTheDatabase) {
  fs::path dir = FreshDir("one_pass_too_small");
  const std::string db = WriteJpegDb(dir, 5);
  CliOutput run = RunCliWithFiles(dir, "train --use_cpu --model lenet --train_data " + db +
                                           " --num_channels 3 --image_size 28 --scale 36 --num_labels 10 "
                                           "--batch_size 8 --epoch_size 0 --log_dir " +
                                           dir.string());
  EXPECT_EQ(run.code, kExitNotRetryable);
  EXPECT_EQ(run.err, "lockstep: error: one pass over " + db +
                         " (5 records, --epoch_size 0) is smaller than the global batch 8 (--batch_size x "
                         "--num_shards): an epoch would have no step\n");
}

// Small images at the default --scale 256 would train on a small enlarged piece of each: a warning names the
// scale to pass.
// Trains on `db` (16 JPEGs of 36x40) with `flags`: stderr is exactly `warning` at the default --scale, and
// empty with --scale 36.
void ExpectScaleWarning(const fs::path& dir, const std::string& db, const std::string& flags,
                        const std::string& warning) {
  const std::string command =
      "train --use_cpu --model lenet --train_data " + db +
      " --num_channels 3 --image_size 28 --num_labels 10 --batch_size 8 --epoch_size 16 " + flags +
      " --log_dir " + dir.string();
  CliOutput enlarged = RunCliWithFiles(dir, command);
  ASSERT_EQ(enlarged.code, 0) << enlarged.err;
  EXPECT_EQ(enlarged.err, "lockstep: warning: --scale 256 enlarges " + warning +
                              " (36x40) to a shortest side of 256 before the 28x28 crop, so the network sees "
                              "a small part of each; pass --scale 36 to crop them at their own size\n");
  CliOutput native = RunCliWithFiles(dir, command + " --scale 36");
  ASSERT_EQ(native.code, 0) << native.err;
  EXPECT_EQ(native.err, "");
}

TEST(TrainerCli, WarnsWhenScaleEnlargesEveryImage) {
  fs::path dir = FreshDir("scale_warning");
  std::string db = WriteJpegDb(dir, 16);
  ImageGeometry geometry;
  geometry.Add(36, 40, 3);  // what make-db would have recorded for these images
  WriteImageGeometry(db, geometry);
  ExpectScaleWarning(dir, db, "--threads 1", "every image of " + db);
}

// A database that make-db did not write records no sizes: the images of the first batch show them, and the
// warning comes once, over two devices, two decoding threads and two epochs.
TEST(TrainerCli, WarnsFromTheFirstBatchWhenNoSizesAreRecorded) {
  fs::path dir = FreshDir("scale_warning_first_batch");
  std::string db = WriteJpegDb(dir, 16);
  ExpectScaleWarning(dir, db, "--num_gpus 2 --num_epochs 2 --threads 2 --decode_threads 2",
                     "the images of the first batch of " + db);
}

// A folder of images is not a database: the error says how to make one.
TEST(TrainerCli, AFolderOfImagesPointsToMakeDb) {
  fs::path dir = FreshDir("image_folder");
  fs::create_directories(dir / "photos" / "cats");
  std::ofstream(dir / "photos" / "cats" / "0001.jpg") << "not decoded";
  auto [code, out, err] = RunCliWithFiles(dir, "train --use_cpu --model lenet --train_data " +
                                                   (dir / "photos").string() + " --log_dir " + dir.string());
  EXPECT_NE(code, 0);
  EXPECT_EQ(err,
            "lockstep: error: '" + (dir / "photos").string() +
                "' is a folder of images, not a database: make one with `lockstep make-db --image_folder " +
                (dir / "photos").string() +
                " --list LIST --output DB` (LIST: 'relative/path label' lines) and train on DB\n");
}

TEST(TrainerCli, BadDatabaseInputNamesTheDatabaseAndKey) {
  fs::path dir = FreshDir("bad_db");
  std::string db = WriteJpegDb(dir, 16, /*bad_label=*/12);
  const std::string flags =
      "--use_cpu --model lenet --num_channels 3 --image_size 28 --num_labels 10 --batch_size 8 --epoch_size "
      "16 "
      "--threads 1 --log_dir " +
      dir.string();
  auto [label_code, label_out, label_err] = RunCliWithFiles(dir, "train --train_data " + db + " " + flags);
  EXPECT_EQ(label_code, kExitNotRetryable);
  EXPECT_NE(label_err.find("record '00000003' of lmdb " + db + " has label 12"), std::string::npos)
      << label_err;
  auto [missing_code, missing_out, missing_err] =
      RunCliWithFiles(dir, "train --train_data " + (dir / "nothing").string() + " " + flags);
  EXPECT_EQ(missing_code, kExitNotRetryable) << "a path that is not there is a flag to correct";
  EXPECT_NE(missing_err.find((dir / "nothing").string()), std::string::npos) << missing_err;
  auto [type_code, type_out, type_err] =
      RunCliWithFiles(dir, "train --db_type leveldb --train_data " + db + " " + flags);
  EXPECT_EQ(type_code, kExitNotRetryable);
  EXPECT_NE(type_err.find("leveldb"), std::string::npos) << type_err;
}

}  // namespace lockstep::testing
