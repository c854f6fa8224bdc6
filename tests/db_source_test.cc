// DbSource: the training stream over an image database, sliced among shards x devices, with its errors, and
// one colour order for raw and encoded records.
#include "lockstep/data/db_source.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "index_db.h"
#include "lockstep/data/batch_reader.h"
#include "lockstep/data/db.h"
#include "lockstep/data/image.h"
#include "python_reference.h"
#include "shards.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

DbSourceOptions IndexOptions(const std::string& type) {
  DbSourceOptions options;
  options.db_type = type;
  options.channels = 1;
  options.num_labels = 10;
  options.transform.crop = 1;  // no resize, mean 0, std 1: the output is the pixel itself
  options.decode_threads = 2;
  return options;
}

class DbSourceTest : public ::testing::TestWithParam<std::string> {};

// 2 shards x 2 devices, each shard with its own source and reader as in two processes: over one epoch every
// record is read exactly once, and each global batch is the database's next B records.
TEST_P(DbSourceTest, ShardsTimesDevicesReadEveryRecordOncePerEpoch) {
  TempDirectory dir;
  const int kRecords = 96, kShards = 2, kDevices = 2, kPerReplica = 4;
  std::string path = MakeIndexDb(dir, GetParam(), kRecords);
  std::map<int, int> reads;
  for (int shard = 0; shard < kShards; ++shard) {
    auto source = std::make_shared<DbSource>(path, IndexOptions(GetParam()));
    EXPECT_EQ(source->size(), kRecords);
    BatchReader reader(source, kPerReplica, kShards * kDevices, /*prefetch=*/2);
    const int steps = kRecords / (kPerReplica * kShards * kDevices);
    for (int step = 0; step < steps; ++step)
      for (int device = kDevices - 1; device >= 0; --device) {
        int replica = shard * kDevices + device;
        Tensor data, label;
        reader.Read(replica, &data, &label);
        std::vector<float> pixels = Values(data);
        for (int i = 0; i < kPerReplica; ++i) {
          int index = static_cast<int>(pixels[i]);
          EXPECT_EQ(index, step * kPerReplica * kShards * kDevices + replica * kPerReplica + i);
          EXPECT_EQ(label.data<int32_t>()[i], index % 10);
          ++reads[index];
        }
      }
  }
  ASSERT_EQ(reads.size(), static_cast<size_t>(kRecords));
  for (const auto& [index, times] : reads) EXPECT_EQ(times, 1) << "record " << index;
}

// The stream wraps around: the second pass starts again at the first record, and a Seek (a resumed run) sees
// the records a run from the start saw at those positions.
TEST_P(DbSourceTest, StreamWrapsAndSeeksLikeOneLongRead) {
  TempDirectory dir;
  std::string path = MakeIndexDb(dir, GetParam(), 10);
  DbSource source(path, IndexOptions(GetParam()));
  Tensor data, label;
  source.Fill(7, 6, &data, &label);
  EXPECT_EQ(Values(data), (std::vector<float>{7, 8, 9, 0, 1, 2}));
  source.Fill(2, 3, &data, &label);  // behind every cursor
  EXPECT_EQ(Values(data), (std::vector<float>{2, 3, 4}));
  source.Fill(25, 2, &data, &label);
  EXPECT_EQ(Values(data), (std::vector<float>{5, 6}));
}

TEST_P(DbSourceTest, BadRecordsNameTheDatabaseAndKeyOrAreSkippedWhenAsked) {
  TempDirectory dir;
  std::string path = MakeIndexDb(dir, GetParam(), 20, {5});
  Tensor data, label;
  {
    DbSource source(path, IndexOptions(GetParam()));
    try {
      source.Fill(4, 4, &data, &label);
      ADD_FAILURE() << "a bad record was read";
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find("'00005'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  DbSourceOptions options = IndexOptions(GetParam());
  options.skip_bad_records = true;
  {
    DbSource skipping(path, options);  // one at a time: LevelDB opens a database in one place only
    skipping.Fill(4, 4, &data, &label);
    EXPECT_EQ(Values(data),
              (std::vector<float>{4, 8, 6, 7}));  // record 8, the next after the batch, stands in
    EXPECT_EQ(skipping.skipped(), 1);
    // Each pass meets record 5 again: it is still one bad record, and the good ones go on standing in.
    for (int pass = 1; pass <= 30; ++pass) skipping.Fill(pass * 20, 20, &data, &label);
    EXPECT_EQ(skipping.skipped(), 1);
    EXPECT_EQ(Values(data)[5], 0.0f);  // record 0, the next after the batch
  }
  options = IndexOptions(GetParam());
  options.num_labels = 5;  // labels go up to 9
  {
    DbSource narrow(path, options);
    try {
      narrow.Fill(6, 2, &data, &label);
      ADD_FAILURE() << "a label outside --num_labels was read";
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find("label 6"), std::string::npos) << e.what();
    }
  }
  // Records 0 and 10 (label 0) stand in for the 18 others.
  options.num_labels = 1;
  options.skip_bad_records = true;
  {
    DbSource few(path, options);
    few.Fill(0, 4, &data, &label);
    EXPECT_EQ(Values(data), (std::vector<float>{0, 10, 0, 10}));
    EXPECT_EQ(few.skipped(), 18);
  }
  // Where no record can be used, skipping ends with why the last one could not.
  TempDirectory other;
  DbSource none(MakeIndexDb(other, GetParam(), 3, {0, 1, 2}), options);
  try {
    none.Fill(0, 2, &data, &label);
    ADD_FAILURE() << "a batch was read where no record is one";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find(": no record can be used (the last: "), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("'00001'"), std::string::npos) << e.what();  // the last tried
  }
}

// Encoded records go through decode, resize, crop and normalization.
TEST_P(DbSourceTest, EncodedImagesAreDecodedCroppedAndNormalized) {
  TempDirectory dir;
  std::string path = dir / "png";
  {
    auto db = OpenDB(GetParam(), path, DbMode::kNew);
    auto transaction = db->NewTransaction();
    Image image;
    image.height = 6;
    image.width = 8;
    image.channels = 3;
    image.pixels.assign(6 * 8 * 3, 0);
    for (int y = 0; y < 6; ++y)
      for (int x = 0; x < 8; ++x)
        for (int c = 0; c < 3; ++c)
          image.pixels[(y * 8 + x) * 3 + c] = static_cast<uint8_t>(10 * c + x + 8 * y);
    ImageRecord record;
    record.label = 3;
    record.encoded = true;
    record.bytes = EncodePng(image);
    transaction->Put("only", MakeTensorProtos(record));
    transaction->Commit();
  }
  DbSourceOptions options;
  options.db_type = GetParam();
  options.num_labels = 10;
  options.transform.crop = 4;  // centre: rows 1..4, columns 2..5
  options.transform.mean = {128.0f};
  options.transform.std = {128.0f};
  DbSource source(path, options);
  Tensor data, label;
  source.Fill(0, 1, &data, &label);
  ASSERT_EQ(data.shape(), (Shape{1, 3, 4, 4}));
  EXPECT_EQ(label.data<int32_t>()[0], 3);
  std::vector<float> values = Values(data);
  // The batch is BGR by default: its channel c is the PNG's RGB channel 2 - c.
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 4; ++x)
        EXPECT_FLOAT_EQ(values[(c * 4 + y) * 4 + x], (10 * (2 - c) + (x + 2) + 8 * (y + 1) - 128) / 128.0f);
}

// A record whose JPEG is cut short, or is not an image at all, is named with its database and key.
TEST_P(DbSourceTest, TruncatedOrForeignImageNamesTheDatabaseAndKey) {
  TempDirectory dir;
  std::string path = dir / "broken_images";
  Image image;
  image.height = image.width = 16;
  image.channels = 3;
  image.pixels.assign(16 * 16 * 3, 77);
  const std::string jpeg = EncodeJpeg(image, 90);
  {
    auto db = OpenDB(GetParam(), path, DbMode::kNew);
    auto transaction = db->NewTransaction();
    ImageRecord record;
    record.encoded = true;
    record.bytes = jpeg.substr(0, jpeg.size() / 2);
    transaction->Put("cut", MakeDatum(record));
    record.bytes = "GIF89a, not a JPEG";
    transaction->Put("gif", MakeDatum(record));
    transaction->Commit();
  }
  DbSourceOptions options;
  options.db_type = GetParam();
  options.num_labels = 10;
  options.transform.crop = 8;
  DbSource source(path, options);
  Tensor data, label;
  const std::pair<int, std::string> expected[] = {
      {0, "record 'cut' of " + GetParam() + " " + path + ": truncated JPEG"},
      {1, "record 'gif' of " + GetParam() + " " + path + ": not a JPEG or PNG"}};
  for (const auto& [position, message] : expected) {
    try {
      source.Fill(position, 1, &data, &label);
      ADD_FAILURE() << "decoded a broken image";
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, DbSourceTest, ::testing::Values("lmdb", "leveldb"));

// Caffe's and Caffe2's own schemas (packages caffe and caffe2, their field numbers), from which protoc
// generates the classes that tests/write_color_pairs.py serializes records with.
constexpr const char* kCaffeProto = R"(syntax = "proto2";
package caffe;
message Datum {
  optional int32 channels = 1;
  optional int32 height = 2;
  optional int32 width = 3;
  optional bytes data = 4;
  optional int32 label = 5;
  repeated float float_data = 6;
  optional bool encoded = 7 [default = false];
}
)";
constexpr const char* kCaffe2Proto = R"(syntax = "proto2";
package caffe2;
message TensorProto {
  repeated int64 dims = 1;
  enum DataType {
    UNDEFINED = 0;
    FLOAT = 1;
    INT32 = 2;
    BYTE = 3;
    STRING = 4;
  }
  optional DataType data_type = 2 [default = FLOAT];
  repeated int32 int32_data = 4 [packed = true];
  optional bytes byte_data = 5;
  repeated bytes string_data = 6;
}
message TensorProtos {
  repeated TensorProto protos = 1;
}
)";

// The databases of tests/write_color_pairs.py, each image stored raw (BGR) and as a JPEG, with the schemas
// compiled by protoc; false (and a reason) when python3 lacks a module the writer needs.
bool WriteColorPairs(const TempDirectory& dir, std::string* missing) {
  const std::string python = kPython;
  for (const char* module : {"google.protobuf", "lmdb", "PIL", "numpy"})
    if (std::system((python + " -c 'import " + module + "' 2>/dev/null").c_str()) != 0) {
      *missing = fmt::format(
          "{} lacks the module {}{}", python, module,
          std::string(module) == "google.protobuf" ? " (scripts/setup.sh installs python3-protobuf)" : "");
      return false;
    }
  std::ofstream(dir / "caffe.proto") << kCaffeProto;
  std::ofstream(dir / "caffe2.proto") << kCaffe2Proto;
  std::string log = dir / "log.txt";
  std::string protoc = fmt::format("protoc --proto_path={0} --python_out={0} {1} {2} > {3} 2>&1", dir.path(),
                                   dir / "caffe.proto", dir / "caffe2.proto", log);
  EXPECT_EQ(std::system(protoc.c_str()), 0) << protoc << "\n" << ReadBytes(log);
  std::string writer =
      fmt::format("{} {}/tests/write_color_pairs.py {} > {} 2>&1", python, SourceDir(), dir.path(), log);
  EXPECT_EQ(std::system(writer.c_str()), 0) << writer << "\n" << ReadBytes(log);
  return true;
}

// The test-mode batch (centre crop, (x - 128) / 128, as the trainer reads a test database) of the whole
// database in the given colour order.
std::vector<float> TestBatch(const std::string& path, ColorOrder order, int scale, int crop, int64_t count) {
  DbSourceOptions options;
  options.num_labels = 10;
  options.transform.scale = scale;
  options.transform.crop = crop;
  options.transform.mean = {128.0f};
  options.transform.std = {128.0f};
  options.transform.color_order = order;
  DbSource source(path, options);
  EXPECT_EQ(source.size(), count);
  Tensor data, label;
  source.Fill(0, count, &data, &label);
  EXPECT_EQ(data.shape(), (Shape{count, 3, crop, crop}));
  for (int64_t i = 0; i < count; ++i) EXPECT_EQ(label.data<int32_t>()[i], i / 2) << "record " << i;
  return Values(data);
}

// A database written with Caffe's (or Caffe2's) own schema holds each image twice: raw BGR pixels and the
// JPEG they were decoded from. Both records of a pair reach the network as the same floats, in BGR or RGB
// alike; RGB is BGR with the first and third channel swapped; and BGR's first channel is the image's blue.
TEST(DbSourceColorOrder, RawBgrAndJpegRecordsOfOneImageGiveTheSameInput) {
  TempDirectory dir;
  std::string missing;
  if (!WriteColorPairs(dir, &missing)) GTEST_SKIP() << missing;
  std::ifstream in(dir / "manifest.json");
  nlohmann::json manifest = nlohmann::json::parse(in);
  const int64_t images = static_cast<int64_t>(manifest["images"].size());
  ASSERT_EQ(images, 4);
  for (const char* db : {"datum_lmdb", "tensorprotos_lmdb"})
    for (int scale : {16, 12}) {  // the shortest side is 16: no resize, then a resize to 12
      SCOPED_TRACE(fmt::format("{} scale {}", db, scale));
      const int crop = 10;
      const int64_t plane = crop * crop, size = 3 * plane;
      std::vector<float> bgr = TestBatch(dir / db, ColorOrder::kBgr, scale, crop, 2 * images);
      std::vector<float> rgb = TestBatch(dir / db, ColorOrder::kRgb, scale, crop, 2 * images);
      for (int64_t i = 0; i < images; ++i) {
        SCOPED_TRACE(fmt::format("image {}", i));
        for (const std::vector<float>* batch : {&bgr, &rgb})
          EXPECT_TRUE(std::equal(batch->begin() + 2 * i * size, batch->begin() + (2 * i + 1) * size,
                                 batch->begin() + (2 * i + 1) * size))
              << "the raw and the JPEG record differ";
        for (int64_t record : {2 * i, 2 * i + 1})
          for (int c = 0; c < 3; ++c)
            EXPECT_TRUE(std::equal(rgb.begin() + record * size + c * plane,
                                   rgb.begin() + record * size + (c + 1) * plane,
                                   bgr.begin() + record * size + (2 - c) * plane))
                << "record " << record << ": rgb channel " << c << " is not bgr channel " << 2 - c;
        if (scale != 16) continue;
        // Without a resize the centre crop is Pillow's decoded pixels, blue first.
        const nlohmann::json& image = manifest["images"][i];
        const int height = image["height"], width = image["width"];
        const int top = (height - crop) / 2, left = (width - crop) / 2;
        for (int c = 0; c < 3; ++c)
          for (int y = 0; y < crop; ++y)
            for (int x = 0; x < crop; ++x) {
              int value = image["rgb"][((top + y) * width + left + x) * 3 + (2 - c)];
              ASSERT_EQ(bgr[2 * i * size + (c * crop + y) * crop + x], (value - 128.0f) / 128.0f)
                  << "channel " << c << " at " << y << "," << x;
            }
      }
    }
}

TEST(DbSource, MissingDatabaseIsOneClearError) {
  try {
    DbSource source("/nonexistent/train_lmdb", IndexOptions("lmdb"));
    ADD_FAILURE() << "opened";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/train_lmdb"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lockstep::testing
