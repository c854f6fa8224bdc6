// DbSource: the training stream over an image database, sliced among shards x devices, with its errors.
#include "lockstep/data/db_source.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "lockstep/data/batch_reader.h"
#include "lockstep/data/db.h"
#include "lockstep/data/image.h"
#include "shards.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

// A database of `count` one-pixel gray records whose pixel is the record's index and whose label is
// index % 10, as raw Datums under zero-padded keys; `bad` records hold garbage instead.
std::string MakeIndexDb(const TempDirectory& dir, const std::string& type, int count,
                        const std::set<int>& bad = {}) {
  std::string path = dir / ("index_" + type);
  auto db = OpenDB(type, path, DbMode::kNew);
  auto transaction = db->NewTransaction();
  for (int i = 0; i < count; ++i) {
    ImageRecord record;
    record.label = i % 10;
    record.channels = record.height = record.width = 1;
    record.bytes = std::string(1, static_cast<char>(i));
    transaction->Put(fmt::format("{:05d}", i), bad.count(i) ? std::string("not a record") : MakeDatum(record));
  }
  transaction->Commit();
  return path;
}

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
    EXPECT_EQ(Values(data), (std::vector<float>{4, 8, 6, 7}));  // record 8, the next after the batch, stands in
    EXPECT_EQ(skipping.skipped(), 1);
  }
  options = IndexOptions(GetParam());
  options.num_labels = 5;  // labels go up to 9
  DbSource narrow(path, options);
  try {
    narrow.Fill(6, 2, &data, &label);
    ADD_FAILURE() << "a label outside --num_labels was read";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("label 6"), std::string::npos) << e.what();
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
        for (int c = 0; c < 3; ++c) image.pixels[(y * 8 + x) * 3 + c] = static_cast<uint8_t>(10 * c + x + 8 * y);
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
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 4; ++x)
        EXPECT_FLOAT_EQ(values[(c * 4 + y) * 4 + x], (10 * c + (x + 2) + 8 * (y + 1) - 128) / 128.0f);
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
  const std::pair<int, std::string> expected[] = {{0, "record 'cut' of " + GetParam() + " " + path + ": truncated JPEG"},
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
