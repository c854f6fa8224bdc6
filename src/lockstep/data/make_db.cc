// MakeDb: the three inputs as one indexed list of images, turned into records on worker threads and
// committed in key order into a database that only takes its final name once it is complete.
#include "lockstep/data/make_db.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <regex>
#include <thread>

#include "lockstep/core/enforce.h"
#include "lockstep/data/db.h"
#include "lockstep/data/idx_dataset.h"
#include "lockstep/data/image.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

constexpr int kCifarSide = 32;
constexpr int64_t kCifarImageBytes = 3 * kCifarSide * kCifarSide;
constexpr int64_t kCifarRecordBytes = 1 + kCifarImageBytes;

bool IsPng(const std::string& bytes) {
  return bytes.size() >= 8 && bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0;
}

// The whole file, or an error naming it as `what` (e.g. "image 'a.jpg' (list.txt:3)"): InvalidInput for a
// path that names no file, which a rerun would not find either; IoError when reading it fails.
std::string ReadFile(const std::string& path, const std::string& what) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) throw InvalidInput(fmt::format("{} does not exist", what));
    throw IoError(fmt::format("cannot read {}: {}", what, std::strerror(errno)));
  }
  std::unique_ptr<int, void (*)(int*)> closer(&fd, [](int* f) { close(*f); });
  struct stat info;
  if (fstat(fd, &info) != 0) throw IoError(fmt::format("cannot read {}: {}", what, std::strerror(errno)));
  if (!S_ISREG(info.st_mode)) throw InvalidInput(fmt::format("{} is not a file", what));
  std::string bytes(static_cast<size_t>(info.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw IoError(fmt::format("cannot read {}: {}", what, std::strerror(errno)));
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

void CheckFileExists(const std::string& path, const std::string& flag) {
  std::error_code error;
  if (!fs::exists(path, error)) throw InvalidInput(fmt::format("{} '{}' does not exist", flag, path));
}

// Pixels (colour in kDecodedColorOrder) as the options ask for them: resized, then encoded as `encoding` or
// kept raw (HWC, colour in kRawColorOrder). The stored image's size is added to `geometry`.
ImageRecord FromPixels(Image image, int32_t label, const std::string& encoding, const MakeDbOptions& options,
                       ImageGeometry* geometry) {
  static_assert(kDecodedColorOrder != kRawColorOrder, "raw records are stored with red and blue swapped");
  if (options.resize > 0) image = ResizeShortestSide(image, options.resize);
  geometry->Add(image.height, image.width, image.channels);
  ImageRecord record;
  record.label = label;
  if (options.encoded) {
    record.encoded = true;
    record.bytes = encoding == "png" ? EncodePng(image) : EncodeJpeg(image);
  } else {
    SwapRedAndBlue(&image);
    record.channels = image.channels;
    record.height = image.height;
    record.width = image.width;
    record.layout = PixelLayout::kHWC;
    record.bytes.assign(image.pixels.begin(), image.pixels.end());
  }
  return record;
}

// The images to write, in input order. Record() is called from several threads at once; it adds the size of
// the image it stores to `geometry`.
class Input {
 public:
  virtual ~Input() = default;
  virtual int64_t size() const = 0;
  virtual std::string Name(int64_t index) const = 0;  // the key's suffix
  virtual ImageRecord Record(int64_t index, ImageGeometry* geometry) const = 0;
};

struct ListEntry {
  std::string path;
  int32_t label = 0;
  int line = 0;
};

std::vector<ListEntry> ReadList(const std::string& list) {
  CheckFileExists(list, "--list");
  std::ifstream in(list);
  if (!in) throw IoError(fmt::format("cannot read --list '{}': {}", list, std::strerror(errno)));
  std::vector<ListEntry> entries;
  std::string line;
  const char* kSpace = " \t\r";
  for (int number = 1; std::getline(in, line); ++number) {
    size_t end = line.find_last_not_of(kSpace);
    if (end == std::string::npos) continue;  // blank line
    line.erase(end + 1);
    // The label is the last word, so paths may hold spaces (as convert_imageset reads its lists).
    size_t split = line.find_last_of(kSpace);
    size_t path_begin = line.find_first_not_of(kSpace);
    if (split == std::string::npos || split < path_begin)
      throw InvalidInput(fmt::format("{}:{}: expected 'relative/path label', got '{}'", list, number, line));
    std::string label = line.substr(split + 1);
    int64_t value = 0;
    auto [last, error] = std::from_chars(label.data(), label.data() + label.size(), value);
    if (error != std::errc() || last != label.data() + label.size())
      throw InvalidInput(fmt::format("{}:{}: label '{}' is not an integer", list, number, label));
    if (value < 0)  // training refuses it at the first batch that holds it
      throw InvalidInput(
          fmt::format("{}:{}: label {} is negative; labels are class indices, 0 to the number of classes - 1",
                      list, number, value));
    if (value > INT32_MAX)
      throw InvalidInput(fmt::format("{}:{}: label {} does not fit in int32", list, number, value));
    size_t path_end = line.find_last_not_of(kSpace, split);
    entries.push_back(
        {line.substr(path_begin, path_end + 1 - path_begin), static_cast<int32_t>(value), number});
  }
  if (in.bad()) throw IoError(fmt::format("cannot read --list '{}': {}", list, std::strerror(errno)));
  return entries;
}

class FolderInput : public Input {
 public:
  FolderInput(const MakeDbOptions& options, int channels) : options_(options), channels_(channels) {
    std::error_code error;
    if (!fs::is_directory(options.image_folder, error))
      throw InvalidInput(fmt::format("--image_folder '{}' is not a directory", options.image_folder));
    entries_ = ReadList(options.list);
  }
  int64_t size() const override { return static_cast<int64_t>(entries_.size()); }
  std::string Name(int64_t index) const override { return entries_[index].path; }

  ImageRecord Record(int64_t index, ImageGeometry* geometry) const override {
    const ListEntry& entry = entries_[index];
    std::string path = (fs::path(options_.image_folder) / entry.path).string();
    std::string what = fmt::format("image '{}' ({}:{})", path, options_.list, entry.line);
    std::string bytes = ReadFile(path, what);
    Image image;
    // Decoded even when the file is stored as it is, so that a damaged file fails here, not in training.
    try {
      image = DecodeImage(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), channels_);
    } catch (const InvalidInput& e) {
      throw InvalidInput(fmt::format("{}: {}", what, e.what()));
    }
    std::string own_encoding = IsPng(bytes) ? "png" : "jpg";
    const std::string& encoding = options_.encoding.empty() ? own_encoding : options_.encoding;
    if (options_.encoded && options_.resize == 0 && channels_ == 3 && encoding == own_encoding) {
      geometry->Add(image.height, image.width, image.channels);
      ImageRecord record;
      record.label = entry.label;
      record.encoded = true;
      record.bytes = std::move(bytes);
      return record;
    }
    return FromPixels(std::move(image), entry.label, encoding, options_, geometry);
  }

 private:
  const MakeDbOptions& options_;
  int channels_;
  std::vector<ListEntry> entries_;
};

class IdxInput : public Input {
 public:
  explicit IdxInput(const MakeDbOptions& options) : options_(options) {
    CheckFileExists(options.idx_images, "--idx_images");
    CheckFileExists(options.idx_labels, "--idx_labels");
    dataset_ = ReadIdxDataset(options.idx_images, options.idx_labels);
    file_name_ = fs::path(options.idx_images).filename().string();
  }
  int64_t size() const override { return dataset_.size(); }
  std::string Name(int64_t index) const override { return fmt::format("{}:{}", file_name_, index); }

  ImageRecord Record(int64_t index, ImageGeometry* geometry) const override {
    auto first = dataset_.pixels.begin() + index * dataset_.image_bytes();
    Image image{dataset_.height, dataset_.width, 1,
                std::vector<uint8_t>(first, first + dataset_.image_bytes())};
    return FromPixels(std::move(image), dataset_.labels[index], options_.encoding, options_, geometry);
  }

 private:
  const MakeDbOptions& options_;
  ImageDataset dataset_;
  std::string file_name_;
};

class CifarInput : public Input {
 public:
  explicit CifarInput(const MakeDbOptions& options) : options_(options) {
    for (const std::string& path : options.cifar10) {
      CheckFileExists(path, "--cifar10");
      std::string bytes = ReadFile(path, fmt::format("--cifar10 '{}'", path));
      if (bytes.empty() || bytes.size() % kCifarRecordBytes != 0)
        throw InvalidInput(
            fmt::format("--cifar10 '{}' is not a CIFAR-10 binary batch: {} bytes is not a whole number of "
                        "{}-byte records "
                        "(1 label byte and 32x32x3 pixels)",
                        path, bytes.size(), kCifarRecordBytes));
      int64_t count = static_cast<int64_t>(bytes.size()) / kCifarRecordBytes;
      for (int64_t i = 0; i < count; ++i) {
        int label = static_cast<uint8_t>(bytes[i * kCifarRecordBytes]);
        if (label > 9)
          throw InvalidInput(fmt::format(
              "--cifar10 '{}': record {} has label {}; CIFAR-10 labels are 0 to 9 (is it a CIFAR-100 file?)",
              path, i, label));
        records_.push_back({files_.size(), i});
      }
      files_.push_back({fs::path(path).filename().string(), std::move(bytes)});
    }
  }
  int64_t size() const override { return static_cast<int64_t>(records_.size()); }
  std::string Name(int64_t index) const override {
    return fmt::format("{}:{}", files_[records_[index].file].name, records_[index].index);
  }

  ImageRecord Record(int64_t index, ImageGeometry* geometry) const override {
    const char* record =
        files_[records_[index].file].bytes.data() + records_[index].index * kCifarRecordBytes;
    const char* planes = record + 1;  // (3, 32, 32): R, G, B
    Image image{kCifarSide, kCifarSide, 3, std::vector<uint8_t>(kCifarImageBytes)};
    for (int c = 0; c < 3; ++c)
      for (int p = 0; p < kCifarSide * kCifarSide; ++p)
        image.pixels[p * 3 + c] = static_cast<uint8_t>(planes[c * kCifarSide * kCifarSide + p]);
    return FromPixels(std::move(image), static_cast<uint8_t>(record[0]), options_.encoding, options_,
                      geometry);
  }

 private:
  struct File {
    std::string name, bytes;
  };
  struct Position {
    size_t file;
    int64_t index;
  };
  const MakeDbOptions& options_;
  std::vector<File> files_;
  std::vector<Position> records_;
};

// Checks the flags that concern the input and returns it with the channel count it will be written with.
std::unique_ptr<Input> OpenInput(const MakeDbOptions& options, int* channels) {
  bool folder = !options.image_folder.empty() || !options.list.empty();
  bool idx = !options.idx_images.empty() || !options.idx_labels.empty();
  bool cifar = !options.cifar10.empty();
  if (folder + idx + cifar != 1)
    throw InvalidInput(
        fmt::format("{}; pass one of --image_folder with --list, --idx_images with --idx_labels, "
                    "or --cifar10",
                    folder + idx + cifar == 0 ? "no input" : "more than one input"));
  if (folder && (options.image_folder.empty() || options.list.empty()))
    throw InvalidInput(options.list.empty()
                           ? "--image_folder needs --list, a file of 'relative/path label' lines"
                           : "--list needs --image_folder, the folder its paths are relative to");
  if (idx && (options.idx_images.empty() || options.idx_labels.empty()))
    throw InvalidInput("--idx_images and --idx_labels go together: the idx3 images and their idx1 labels");
  int own = idx ? 1 : 3;
  *channels = options.channels == 0 ? own : options.channels;
  if (*channels != 1 && *channels != 3)
    throw InvalidInput(fmt::format("--channels {}: images are written with 1 (gray) or 3 (colour) channels",
                                   options.channels));
  if (!folder && *channels != own)
    throw InvalidInput(fmt::format("--channels {}: {} images have {} channel{}; leave --channels out",
                                   *channels, idx ? "idx" : "CIFAR-10", own, own == 1 ? "" : "s"));
  if (folder) return std::make_unique<FolderInput>(options, *channels);
  if (idx) return std::make_unique<IdxInput>(options);
  return std::make_unique<CifarInput>(options);
}

// The first entry of the database folder `dir` that neither LMDB, LevelDB nor make-db itself writes there;
// "" when there is none.
std::string NotOfTheDatabase(const fs::path& dir) {
  static const std::regex kOwn(
      R"((data|lock)\.mdb|CURRENT|LOCK|LOG(\.old)?|MANIFEST-\d+|\d+\.(log|ldb|sst))");
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name != kImageGeometryFile && !std::regex_match(name, kOwn)) return name;
  }
  return "";
}

void CheckOutput(const MakeDbOptions& options) {
  auto types = DbTypes();
  if (std::find(types.begin(), types.end(), options.db_type) == types.end())
    throw InvalidInput(
        fmt::format("unknown --db '{}'; known types: {}", options.db_type, fmt::join(types, ", ")));
  if (options.format != RecordFormat::kDatum && options.format != RecordFormat::kTensorProtos)
    throw InvalidInput("--format must be datum or tensorprotos");
  if (!options.encoding.empty() && options.encoding != "jpg" && options.encoding != "png")
    throw InvalidInput(fmt::format("--encoding '{}': images are encoded as jpg or png", options.encoding));
  if (!options.encoding.empty() && !options.encoded)
    throw InvalidInput("--encoding applies to encoded records; add --encoded");
  if (options.resize < 0) throw InvalidInput(fmt::format("--resize {} is negative", options.resize));
  if (options.threads < 0) throw InvalidInput(fmt::format("--threads {} is negative", options.threads));
  LOCKSTEP_ENFORCE_GE(options.commit_every, 1);
  if (options.output.empty()) throw InvalidInput("no output path; pass --output");
  std::error_code error;
  fs::path output(options.output);
  if (fs::symlink_status(output, error).type() != fs::file_type::not_found) {
    if (!options.overwrite)
      throw InvalidInput(fmt::format(
          "'{}' already exists; pass --overwrite to replace it, or choose another --output", options.output));
    // --overwrite replaces a database, never anything else at a mistyped path (a file, a folder of one's
    // own, or the target of a link, which would stay as it was).
    const auto refuse = [&](const std::string& what) {
      return InvalidInput(
          fmt::format("'{}' {}; --overwrite only replaces databases, so remove it yourself or choose another "
                      "--output",
                      options.output, what));
    };
    if (fs::is_symlink(fs::symlink_status(output, error))) throw refuse("is a symbolic link");
    if (!fs::is_directory(fs::symlink_status(output, error))) throw refuse("is a file, not a database");
    if (GuessDbType(options.output).empty()) throw refuse("is a directory that holds no database");
    if (const std::string other = NotOfTheDatabase(output); !other.empty())
      throw refuse(fmt::format("holds '{}' beside its database", other));
  }
  fs::path parent = fs::absolute(output, error).parent_path();
  if (!fs::is_directory(parent, error))
    throw InvalidInput(fmt::format("cannot create '{}': directory '{}' does not exist; create it first",
                                   options.output, parent.string()));
}

// Removes a half-written database unless it was finished.
class RemoveUnlessKept {
 public:
  explicit RemoveUnlessKept(std::string path) : path_(std::move(path)) {}
  ~RemoveUnlessKept() {
    std::error_code error;
    if (!kept_) fs::remove_all(path_, error);
  }
  void Keep() { kept_ = true; }

 private:
  std::string path_;
  bool kept_ = false;
};

// Fills values[j] with the serialized record of input index order[first + j], on `threads` threads, and adds
// the images' sizes to `geometry`. The error of the lowest failing j is rethrown: indices are claimed in
// order and workers only stop claiming after a failure, so every lower index has been made.
void MakeValues(const Input& input, const std::vector<int64_t>& order, int64_t first, RecordFormat format,
                int threads, std::vector<std::string>* values, ImageGeometry* geometry) {
  const int64_t count = static_cast<int64_t>(values->size());
  std::vector<std::exception_ptr> errors(count);
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex geometry_mutex;
  auto work = [&] {
    ImageGeometry seen;  // this worker's, merged once at the end
    for (int64_t j; !failed && (j = next++) < count;) {
      try {
        ImageRecord record = input.Record(order[first + j], &seen);
        (*values)[j] = format == RecordFormat::kDatum ? MakeDatum(record) : MakeTensorProtos(record);
      } catch (...) {
        errors[j] = std::current_exception();
        failed = true;
      }
    }
    std::lock_guard<std::mutex> lock(geometry_mutex);
    geometry->Merge(seen);
  };
  int workers = static_cast<int>(std::min<int64_t>(threads, count));
  std::vector<std::thread> pool;
  for (int t = 1; t < workers; ++t) pool.emplace_back(work);
  work();
  for (auto& thread : pool) thread.join();
  for (const auto& error : errors)
    if (error) std::rethrow_exception(error);
}

}  // namespace

MakeDbResult MakeDb(const MakeDbOptions& options) {
  CheckOutput(options);
  int channels = 0;
  std::unique_ptr<Input> input = OpenInput(options, &channels);
  const int64_t total = input->size();
  if (total == 0) throw InvalidInput("the input holds no images; nothing to write");

  std::vector<int64_t> order(total);
  std::iota(order.begin(), order.end(), 0);
  if (options.shuffle) {
    std::mt19937_64 rng(options.seed);
    // Fisher-Yates with our own index draw: std::shuffle's use of the engine is not fixed by the standard.
    for (int64_t i = total - 1; i > 0; --i) std::swap(order[i], order[rng() % static_cast<uint64_t>(i + 1)]);
  }
  // Wide enough for every position, so that bytewise key order stays position order past 10^8 records.
  const int digits = std::max<int>(8, static_cast<int>(std::to_string(total - 1).size()));
  int threads = options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::max(threads, 1);

  const std::string temporary = fmt::format("{}.tmp-{}", options.output, getpid());
  RemoveUnlessKept cleanup(temporary);
  MakeDbResult result{total, {}};
  {
    std::unique_ptr<DB> db = OpenDB(options.db_type, temporary, DbMode::kNew);
    std::unique_ptr<Transaction> transaction = db->NewTransaction();
    std::vector<std::string> values;
    for (int64_t first = 0; first < total; first += options.commit_every) {
      values.assign(std::min(options.commit_every, total - first), std::string());
      MakeValues(*input, order, first, options.format, threads, &values, &result.geometry);
      for (size_t j = 0; j < values.size(); ++j) {
        int64_t position = first + static_cast<int64_t>(j);
        transaction->Put(fmt::format("{:0{}d}_{}", position, digits, input->Name(order[position])),
                         values[j]);
      }
      transaction->Commit();
      if (options.progress) options.progress(first + static_cast<int64_t>(values.size()), total);
    }
  }  // closes the database before it is renamed
  WriteImageGeometry(temporary, result.geometry);

  std::error_code error;
  if (options.overwrite) {
    fs::remove_all(options.output, error);
    if (error) throw IoError(fmt::format("cannot remove the old '{}': {}", options.output, error.message()));
  }
  fs::rename(temporary, options.output, error);
  if (error)
    throw IoError(fmt::format("cannot rename '{}' to '{}': {}", temporary, options.output, error.message()));
  cleanup.Keep();
  return result;
}

}  // namespace lockstep
