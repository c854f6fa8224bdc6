// make-db: folders, idx pairs and CIFAR-10 batches written as LMDB and LevelDB databases of Datum and
// TensorProtos records read back with exact labels and pixels in list (or seeded shuffle) order; resize,
// gray and re-encoding; and one-line errors from the CLI that leave no database behind.
#include "lockstep/data/make_db.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "lockstep/core/enforce.h"
#include "lockstep/data/db.h"
#include "lockstep/data/image.h"
#include "processes.h"
#include "python_reference.h"
#include "shards.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

namespace fs = std::filesystem;

bool IsPng(const std::string& bytes) { return bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0; }
bool IsJpeg(const std::string& bytes) { return bytes.compare(0, 2, "\xff\xd8") == 0; }

Image Decode(const std::string& bytes, int channels) {
  return DecodeImage(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), channels);
}

// A record's raw pixels as (height, width, channels) in the order they are stored, from either layout.
Image RawPixelsOf(const ImageRecord& record) {
  Image image{record.height, record.width, record.channels,
              std::vector<uint8_t>(size_t{1} * record.height * record.width * record.channels)};
  for (int y = 0; y < record.height; ++y)
    for (int x = 0; x < record.width; ++x)
      for (int c = 0; c < record.channels; ++c)
        image.pixels[(size_t{1} * y * record.width + x) * record.channels + c] = record.pixel(c, y, x);
  return image;
}

// A record's pixels as (height, width, channels), colour in RGB order as the files decode, whether it holds
// a file or raw (BGR) pixels in either layout.
Image PixelsOf(const ImageRecord& record, int channels) {
  if (record.encoded) return Decode(record.bytes, channels);
  Image image = RawPixelsOf(record);
  SwapRedAndBlue(&image);
  return image;
}

void ExpectSamePixels(const Image& actual, const Image& expected) {
  ASSERT_EQ(actual.height, expected.height);
  ASSERT_EQ(actual.width, expected.width);
  ASSERT_EQ(actual.channels, expected.channels);
  EXPECT_TRUE(actual.pixels == expected.pixels);
}

struct Entry {
  std::string key, value;
  ImageRecord record;
};

// Every record in key order, each parsed as `format`, which must also be the format it is detected as.
std::vector<Entry> ReadDb(const std::string& type, const std::string& path, RecordFormat format) {
  auto db = OpenDB(type, path, DbMode::kRead);
  std::vector<Entry> entries;
  auto cursor = db->NewCursor();
  for (cursor->SeekToFirst(); cursor->valid(); cursor->Next()) {
    Entry entry{std::string(cursor->key()), std::string(cursor->value()), {}};
    EXPECT_EQ(DetectRecordFormat(entry.value), format) << entry.key;
    entry.record = ParseImageRecord(entry.value, format, path, entry.key);
    entries.push_back(std::move(entry));
  }
  EXPECT_EQ(db->Count(), static_cast<int64_t>(entries.size()));
  return entries;
}

// The image folder's list, as tests/make_db_reference.py writes it.
const std::vector<std::pair<std::string, int>> kFolder = {
    {"b.png", 7}, {"a.png", 0}, {"sub dir/c d.png", 3}, {"e.jpg", 12}, {"gray.png", 5},
    {"f.jpg", 1}, {"g.png", 2}};

std::string Key(int position, const std::string& name) {
  char prefix[16];
  std::snprintf(prefix, sizeof(prefix), "%08d_", position);
  return prefix + name;
}

// Files in `directory` whose name holds ".tmp-": what a failed or unfinished write would leave.
std::vector<std::string> Leftovers(const std::string& directory) {
  std::vector<std::string> found;
  for (const auto& item : fs::directory_iterator(directory))
    if (item.path().filename().string().find(".tmp-") != std::string::npos) found.push_back(item.path());
  return found;
}

class MakeDbTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    directory_ = new TempDirectory();
    available_ = RunPythonReference("make_db_reference.py", *directory_);
    expected_ = ReadReferenceImages(*directory_);
  }
  static void TearDownTestSuite() {
    delete directory_;
    directory_ = nullptr;
    expected_.clear();
  }
  void SetUp() override {
    if (!available_) GTEST_SKIP() << kPython << " with PIL and numpy is needed to write the inputs";
    output_directory_ = std::make_unique<TempDirectory>();
  }

  static std::string Input(const std::string& name) { return *directory_ / name; }
  static const Image& Expected(const std::string& name) {
    auto found = expected_.find(name);
    if (found == expected_.end()) throw std::runtime_error("no reference " + name);
    return found->second;
  }
  // The pixels of the list's i-th image as Pillow gives them (suffix ".rgb", ".gray" or ".rgb.resize8").
  static const Image& ExpectedFolder(size_t i, const std::string& suffix) {
    return Expected("folder" + std::to_string(i) + suffix);
  }
  std::string Output(const std::string& name) const { return *output_directory_ / name; }

  // The folder input, written in small commits by several threads so both paths are exercised.
  MakeDbOptions FolderOptions(const std::string& output, const std::string& list = "list.txt") const {
    MakeDbOptions options;
    options.image_folder = Input("images");
    options.list = Input(list);
    options.output = Output(output);
    options.threads = 3;
    options.commit_every = 2;
    return options;
  }

  static TempDirectory* directory_;
  static bool available_;
  static std::map<std::string, Image> expected_;
  std::unique_ptr<TempDirectory> output_directory_;
};

TempDirectory* MakeDbTest::directory_ = nullptr;
bool MakeDbTest::available_ = false;
std::map<std::string, Image> MakeDbTest::expected_;

bool IsJpegName(const std::string& name) {
  return name.size() > 4 && name.compare(name.size() - 4, 4, ".jpg") == 0;
}

TEST_F(MakeDbTest, FolderRoundTripsInListOrder) {
  for (std::string type : {"lmdb", "leveldb"})
    for (RecordFormat format : {RecordFormat::kDatum, RecordFormat::kTensorProtos})
      for (bool encoded : {false, true}) {
        std::string name = type + "_" + RecordFormatName(format) + (encoded ? "_encoded" : "_raw");
        SCOPED_TRACE(name);
        MakeDbOptions options = FolderOptions(name);
        options.db_type = type;
        options.format = format;
        options.encoded = encoded;
        EXPECT_EQ(MakeDb(options).records, 7);
        auto entries = ReadDb(type, options.output, format);
        ASSERT_EQ(entries.size(), kFolder.size());
        for (size_t i = 0; i < kFolder.size(); ++i) {
          const auto& [file, label] = kFolder[i];
          SCOPED_TRACE(file);
          const ImageRecord& record = entries[i].record;
          EXPECT_EQ(entries[i].key, Key(static_cast<int>(i), file));
          EXPECT_EQ(record.label, label);
          std::string bytes = ReadBytes(Input("images/" + file));
          EXPECT_EQ(record.encoded, encoded);
          if (encoded) {
            EXPECT_TRUE(record.bytes == bytes) << "an encoded record holds the original file";
          } else {
            EXPECT_EQ(record.channels, 3);
            EXPECT_EQ(record.layout, format == RecordFormat::kDatum ? PixelLayout::kCHW : PixelLayout::kHWC);
          }
          ExpectSamePixels(PixelsOf(record, 3),
                           IsJpegName(file) ? Decode(bytes, 3) : ExpectedFolder(i, ".rgb"));
        }
        EXPECT_TRUE(Leftovers(output_directory_->path()).empty());
      }
}

TEST_F(MakeDbTest, GrayChannels) {
  for (bool encoded : {false, true}) {
    SCOPED_TRACE(encoded ? "encoded" : "raw");
    MakeDbOptions options = FolderOptions(encoded ? "encoded" : "raw");
    options.channels = 1;
    options.encoded = encoded;
    MakeDb(options);
    auto entries = ReadDb("lmdb", options.output, RecordFormat::kDatum);
    ASSERT_EQ(entries.size(), kFolder.size());
    for (size_t i = 0; i < kFolder.size(); ++i) {
      const std::string& file = kFolder[i].first;
      SCOPED_TRACE(file);
      const ImageRecord& record = entries[i].record;
      std::string bytes = ReadBytes(Input("images/" + file));
      if (!encoded) EXPECT_EQ(record.channels, 1);
      if (encoded) {
        // Gray asks for re-encoding, in the file's own format.
        EXPECT_TRUE(IsJpegName(file) ? IsJpeg(record.bytes) : IsPng(record.bytes));
        EXPECT_FALSE(record.bytes == bytes);
      }
      if (encoded && IsJpegName(file)) {
        Image image = PixelsOf(record, 1);
        EXPECT_EQ(image.height, Decode(bytes, 1).height);
        EXPECT_EQ(image.width, Decode(bytes, 1).width);
      } else {
        ExpectSamePixels(PixelsOf(record, 1),
                         IsJpegName(file) ? Decode(bytes, 1) : ExpectedFolder(i, ".gray"));
      }
    }
  }
}

TEST_F(MakeDbTest, EncodingPngStoresLosslessCopies) {
  MakeDbOptions options = FolderOptions("png");
  options.encoded = true;
  options.encoding = "png";
  options.format = RecordFormat::kTensorProtos;
  MakeDb(options);
  auto entries = ReadDb("lmdb", options.output, RecordFormat::kTensorProtos);
  ASSERT_EQ(entries.size(), kFolder.size());
  for (size_t i = 0; i < kFolder.size(); ++i) {
    const std::string& file = kFolder[i].first;
    SCOPED_TRACE(file);
    EXPECT_TRUE(IsPng(entries[i].record.bytes));
    std::string bytes = ReadBytes(Input("images/" + file));
    ExpectSamePixels(PixelsOf(entries[i].record, 3),
                     IsJpegName(file) ? Decode(bytes, 3) : ExpectedFolder(i, ".rgb"));
  }
}

TEST_F(MakeDbTest, ResizeGivesTheShortestSide) {
  for (bool encoded : {false, true}) {
    SCOPED_TRACE(encoded ? "encoded" : "raw");
    MakeDbOptions options = FolderOptions(encoded ? "encoded" : "raw");
    options.resize = 8;
    options.encoded = encoded;
    MakeDb(options);
    auto entries = ReadDb("lmdb", options.output, RecordFormat::kDatum);
    ASSERT_EQ(entries.size(), kFolder.size());
    for (size_t i = 0; i < kFolder.size(); ++i) {
      const std::string& file = kFolder[i].first;
      SCOPED_TRACE(file);
      const ImageRecord& record = entries[i].record;
      Image image = PixelsOf(record, 3);
      EXPECT_EQ(std::min(image.height, image.width), 8);
      Image original = Decode(ReadBytes(Input("images/" + file)), 3);
      int height, width;
      ShortestSideSize(original.height, original.width, 8, &height, &width);
      EXPECT_EQ(image.height, height);
      EXPECT_EQ(image.width, width);
      if (encoded) EXPECT_TRUE(IsJpegName(file) ? IsJpeg(record.bytes) : IsPng(record.bytes));
      if (!IsJpegName(file)) ExpectSamePixels(image, ExpectedFolder(i, ".rgb.resize8"));
    }
  }
}

TEST_F(MakeDbTest, ShuffleIsASeededPermutation) {
  auto make = [&](const std::string& name, uint64_t seed) {
    MakeDbOptions options = FolderOptions(name);
    options.shuffle = true;
    options.seed = seed;
    MakeDb(options);
    return ReadDb("lmdb", options.output, RecordFormat::kDatum);
  };
  auto first = make("seed5", 5), again = make("seed5_again", 5), other = make("seed6", 6);
  ASSERT_EQ(first.size(), kFolder.size());
  ASSERT_EQ(again.size(), kFolder.size());
  std::map<std::string, int> labels(kFolder.begin(), kFolder.end());
  std::vector<std::string> order, other_order;
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].key, again[i].key);
    EXPECT_TRUE(first[i].value == again[i].value);
    ASSERT_EQ(first[i].key.substr(0, 9), Key(static_cast<int>(i), ""));
    std::string file = first[i].key.substr(9);
    ASSERT_EQ(labels.count(file), 1u) << file;
    EXPECT_EQ(first[i].record.label, labels[file]);
    order.push_back(file);
    other_order.push_back(other[i].key.substr(9));
  }
  std::vector<std::string> list_order;
  for (const auto& item : kFolder) list_order.push_back(item.first);
  EXPECT_NE(order, list_order);
  EXPECT_NE(order, other_order);
  std::sort(order.begin(), order.end());
  std::sort(list_order.begin(), list_order.end());
  EXPECT_EQ(order, list_order);
}

TEST_F(MakeDbTest, IdxRecords) {
  for (RecordFormat format : {RecordFormat::kDatum, RecordFormat::kTensorProtos})
    for (bool encoded : {false, true}) {
      std::string name = std::string(RecordFormatName(format)) + (encoded ? "_png" : "_raw");
      SCOPED_TRACE(name);
      MakeDbOptions options;
      options.idx_images = Input("images.idx3.gz");
      options.idx_labels = Input("labels.idx1");
      options.output = Output(name);
      options.db_type = "leveldb";
      options.format = format;
      options.encoded = encoded;
      if (encoded) options.encoding = "png";
      EXPECT_EQ(MakeDb(options).records, 6);
      // The images' size is recorded in the database, for the trainer's check of --scale.
      std::optional<ImageGeometry> geometry = ReadImageGeometry(options.output);
      ASSERT_TRUE(geometry);
      EXPECT_EQ(geometry->SizeText(), "5x4");
      EXPECT_EQ(geometry->channels, 1);
      EXPECT_EQ(geometry->min_shortest_side, 4);
      EXPECT_EQ(geometry->max_shortest_side, 4);
      auto entries = ReadDb("leveldb", options.output, format);
      ASSERT_EQ(entries.size(), 6u);
      const int labels[] = {3, 1, 4, 1, 5, 9};
      for (int i = 0; i < 6; ++i) {
        EXPECT_EQ(entries[i].key, Key(i, "images.idx3.gz:" + std::to_string(i)));
        EXPECT_EQ(entries[i].record.label, labels[i]);
        EXPECT_EQ(entries[i].record.encoded, encoded);
        if (encoded) EXPECT_TRUE(IsPng(entries[i].record.bytes));
        ExpectSamePixels(PixelsOf(entries[i].record, 1), Expected("idx." + std::to_string(i)));
      }
    }
}

TEST_F(MakeDbTest, CifarRecords) {
  const std::string batches[] = {ReadBytes(Input("batch_0.bin")), ReadBytes(Input("batch_1.bin"))};
  for (RecordFormat format : {RecordFormat::kDatum, RecordFormat::kTensorProtos}) {
    SCOPED_TRACE(RecordFormatName(format));
    MakeDbOptions options;
    options.cifar10 = {Input("batch_0.bin"), Input("batch_1.bin")};
    options.output = Output(RecordFormatName(format));
    options.format = format;
    EXPECT_EQ(MakeDb(options).records, 5);
    auto entries = ReadDb("lmdb", options.output, format);
    ASSERT_EQ(entries.size(), 5u);
    const int labels[] = {9, 0, 4, 2, 7};
    for (int i = 0; i < 5; ++i) {
      int batch = i < 3 ? 0 : 1, index = i < 3 ? i : i - 3;
      std::string name = std::to_string(batch) + "." + std::to_string(index);
      const ImageRecord& record = entries[i].record;
      EXPECT_EQ(entries[i].key, Key(i, "batch_" + name.substr(0, 1) + ".bin:" + std::to_string(index)));
      EXPECT_EQ(record.label, labels[i]);
      ASSERT_FALSE(record.encoded);
      EXPECT_EQ(record.channels, 3);
      EXPECT_EQ(record.height, 32);
      EXPECT_EQ(record.width, 32);
      // A Datum holds the file's R, G, B planes as B, G, R, the order convert_imageset stores colour in;
      // TensorProtos the same pixels interleaved.
      const std::string planes = batches[batch].substr(index * 3073 + 1, 3072);
      if (format == RecordFormat::kDatum)
        EXPECT_TRUE(record.bytes == planes.substr(2048) + planes.substr(1024, 1024) + planes.substr(0, 1024));
      else
        EXPECT_TRUE(record.bytes == ReadBytes(Input("cifar." + name + ".bgr.raw")));
      ExpectSamePixels(PixelsOf(record, 3), Expected("cifar." + name));
    }
  }
  MakeDbOptions encoded;
  encoded.cifar10 = {Input("batch_1.bin")};
  encoded.output = Output("encoded");
  encoded.encoded = true;
  MakeDb(encoded);
  auto entries = ReadDb("lmdb", encoded.output, RecordFormat::kDatum);
  ASSERT_EQ(entries.size(), 2u);
  for (const Entry& entry : entries) {
    EXPECT_TRUE(IsJpeg(entry.record.bytes));
    EXPECT_EQ(PixelsOf(entry.record, 3).height, 32);
  }
}

// A failure after some records were committed leaves neither the database nor its temporary directory, and
// keeps an old database that --overwrite was to replace.
TEST_F(MakeDbTest, FailureLeavesNothingBehind) {
  MakeDbOptions options = FolderOptions("db");
  MakeDb(options);
  MakeDbOptions failing = FolderOptions("db", "not_image.txt");
  failing.commit_every = 1;
  failing.threads = 1;
  failing.overwrite = true;
  EXPECT_THROW(MakeDb(failing), InvalidInput);
  EXPECT_EQ(ReadDb("lmdb", options.output, RecordFormat::kDatum).size(), kFolder.size());
  failing.output = Output("new");
  EXPECT_THROW(MakeDb(failing), InvalidInput);
  EXPECT_FALSE(fs::exists(failing.output));
  EXPECT_TRUE(Leftovers(output_directory_->path()).empty());
}

struct CliResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CliResult RunCli(const std::vector<std::string>& arguments, const std::string& output_file) {
  std::vector<std::string> argv = {CliPath(), "make-db"};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  Process process(argv, output_file);
  std::optional<int> code = process.Wait(std::chrono::seconds(60));
  EXPECT_TRUE(code.has_value()) << "make-db did not finish";
  return {code.value_or(-1), process.Output()};
}

// Raw colour records hold BGR, as convert_imageset and make_image_db write them: Datum as B, G, R planes,
// TensorProtos as interleaved B, G, R, byte for byte what the reference writer gives (Pillow's pixels with
// red and blue swapped), from the library and from the CLI alike.
TEST_F(MakeDbTest, RawRecordsAreBgr) {
  for (RecordFormat format : {RecordFormat::kDatum, RecordFormat::kTensorProtos}) {
    SCOPED_TRACE(RecordFormatName(format));
    MakeDbOptions options = FolderOptions(RecordFormatName(format));
    options.format = format;
    MakeDb(options);
    std::string cli_output = Output(std::string("cli_") + RecordFormatName(format));
    CliResult made = RunCli({"--image_folder", Input("images"), "--list", Input("list.txt"), "--raw",
                             "--format", RecordFormatName(format), "--output", cli_output},
                            Output(std::string("log_") + RecordFormatName(format)));
    ASSERT_EQ(made.exit_code, 0) << made.output;
    for (const std::string& path : {options.output, cli_output}) {
      auto entries = ReadDb("lmdb", path, format);
      ASSERT_EQ(entries.size(), kFolder.size());
      for (size_t i = 0; i < kFolder.size(); ++i) {
        const std::string& file = kFolder[i].first;
        SCOPED_TRACE(path + " " + file);
        const ImageRecord& record = entries[i].record;
        ASSERT_FALSE(record.encoded);
        Image expected;
        if (IsJpegName(file)) {  // the decoder's own pixels, swapped
          expected = Decode(ReadBytes(Input("images/" + file)), 3);
          SwapRedAndBlue(&expected);
        } else {
          expected = ExpectedFolder(i, ".bgr");
        }
        ExpectSamePixels(RawPixelsOf(record), expected);
        if (format == RecordFormat::kTensorProtos)
          EXPECT_TRUE(record.bytes == std::string(expected.pixels.begin(), expected.pixels.end()));
      }
    }
  }
}

TEST_F(MakeDbTest, CliWritesAndReplacesWithOverwrite) {
  std::string db = Output("db");
  std::vector<std::string> folder = {"--image_folder",  Input("images"), "--list",
                                     Input("list.txt"), "--output",      db};
  CliResult made = RunCli(folder, Output("log1"));
  EXPECT_EQ(made.exit_code, 0) << made.output;
  EXPECT_EQ(made.output, "wrote 7 records of 9x12 to 37x53 images with 3 channels to lmdb " + db + "\n");

  std::vector<std::string> idx = {
      "--idx_images", Input("images.idx3.gz"), "--idx_labels", Input("labels.idx1"), "--output", db};
  CliResult refused = RunCli(idx, Output("log2"));
  EXPECT_EQ(refused.exit_code, kExitNotRetryable);
  EXPECT_EQ(refused.output,
            "lockstep: error: '" + db +
                "' already exists; pass --overwrite to replace it, or choose another --output\n");
  EXPECT_EQ(ReadDb("lmdb", db, RecordFormat::kDatum).size(), 7u);

  idx.push_back("--overwrite");
  CliResult replaced = RunCli(idx, Output("log3"));
  EXPECT_EQ(replaced.exit_code, 0) << replaced.output;
  EXPECT_EQ(ReadDb("lmdb", db, RecordFormat::kDatum).size(), 6u);
  EXPECT_TRUE(Leftovers(output_directory_->path()).empty());

  // --overwrite replaces a database only: not a file (here the list being read), nor a folder that holds
  // something of the user's beside its database, nor a link (whose target would stay as it was).
  const std::string list_copy = Output("list_copy.txt"), link = Output("link");
  fs::copy_file(Input("list.txt"), list_copy);
  fs::create_symlink(db, link);
  std::ofstream(db + "/notes.txt") << "mine";
  const std::pair<std::string, std::string> refusals[] = {
      {list_copy, "'" + list_copy + "' is a file, not a database"},
      {db, "'" + db + "' holds 'notes.txt' beside its database"},
      {link, "'" + link + "' is a symbolic link"}};
  for (const auto& [output, message] : refusals) {
    CliResult kept =
        RunCli({"--image_folder", Input("images"), "--list", list_copy, "--output", output, "--overwrite"},
               Output("log4"));
    EXPECT_EQ(kept.exit_code, kExitNotRetryable) << output;
    EXPECT_EQ(kept.output,
              "lockstep: error: " + message +
                  "; --overwrite only replaces databases, so remove it yourself or choose another "
                  "--output\n");
  }
  EXPECT_EQ(ReadFile(list_copy), ReadFile(Input("list.txt")));
  EXPECT_EQ(ReadDb("lmdb", db, RecordFormat::kDatum).size(), 6u);
  EXPECT_TRUE(fs::is_symlink(link));
}

TEST_F(MakeDbTest, CliErrorsAreOneLine) {
  fs::create_directory(Output("not_a_db"));
  struct Case {
    std::vector<std::string> arguments;
    std::vector<std::string> fragments;
  };
  auto folder = [&](const std::string& list) {
    return std::vector<std::string>{"--image_folder", Input("images"), "--list", Input(list)};
  };
  auto with = [](std::vector<std::string> arguments, const std::vector<std::string>& more) {
    arguments.insert(arguments.end(), more.begin(), more.end());
    return arguments;
  };
  const std::vector<Case> cases = {
      {folder("bad_line.txt"), {"bad_line.txt:2: expected 'relative/path label', got 'b.png'"}},
      {folder("bad_label.txt"), {"bad_label.txt:3: label 'two' is not an integer"}},
      {folder("negative_label.txt"),
       {"negative_label.txt:2: label -1 is negative; labels are class indices"}},
      {folder("missing.txt"), {"nothere.png", "missing.txt:2", "does not exist"}},
      {folder("not_image.txt"), {"notes.png", "not_image.txt:2", "not a JPEG or PNG"}},
      {folder("no_such_list.txt"), {"--list", "no_such_list.txt", "does not exist"}},
      {{"--cifar10", Input("short.bin")}, {"short.bin", "not a CIFAR-10 binary batch", "3073"}},
      {{"--idx_images", Input("images.idx3.gz"), "--idx_labels", Input("labels.idx1"), "--channels", "3"},
       {"--channels 3", "idx"}},
      {with(folder("list.txt"), {"--cifar10", Input("batch_0.bin")}), {"more than one input"}},
      {{"--list", Input("list.txt")}, {"--list needs --image_folder"}},
      {with(folder("list.txt"), {"--encoding", "png"}), {"--encoding", "--encoded"}},
      {{"--image_folder", Input("no_such_folder"), "--list", Input("list.txt")},
       {"--image_folder", "no_such_folder' is not a directory"}},
  };
  int number = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.fragments.front());
    std::string output = Output("db" + std::to_string(number));
    CliResult result =
        RunCli(with(c.arguments, {"--output", output}), Output("log" + std::to_string(number++)));
    EXPECT_EQ(result.exit_code, kExitNotRetryable) << "a rerun fails the same way";
    EXPECT_EQ(result.output.rfind("lockstep: error: ", 0), 0u) << result.output;
    ASSERT_FALSE(result.output.empty());
    EXPECT_EQ(result.output.find('\n'), result.output.size() - 1) << result.output;
    for (const auto& fragment : c.fragments)
      EXPECT_NE(result.output.find(fragment), std::string::npos) << result.output;
    EXPECT_FALSE(fs::exists(output));
  }
  const std::string nowhere = Output("no_such_dir/db");
  CliResult no_parent = RunCli(with(folder("list.txt"), {"--output", nowhere}), Output("log"));
  EXPECT_EQ(no_parent.exit_code, kExitNotRetryable);
  EXPECT_NE(no_parent.output.find("cannot create '" + nowhere + "': directory '" + Output("no_such_dir") +
                                  "' does not exist; create it first"),
            std::string::npos)
      << no_parent.output;
  CliResult refused =
      RunCli(with(folder("list.txt"), {"--output", Output("not_a_db"), "--overwrite"}), Output("log"));
  EXPECT_EQ(refused.exit_code, kExitNotRetryable);
  EXPECT_NE(refused.output.find("holds no database"), std::string::npos) << refused.output;
  EXPECT_TRUE(fs::is_directory(Output("not_a_db")));
  EXPECT_TRUE(Leftovers(output_directory_->path()).empty());
}

}  // namespace
}  // namespace lockstep::testing
