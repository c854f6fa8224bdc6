// Safetensors reader and writer over POSIX files: the writer syncs before renaming (an interrupted save never
// replaces a good checkpoint), the reader validates the whole header before reading any tensor bytes.
#include "lockstep/train/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

namespace lockstep {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors stores little-endian bytes as they are");

using Json = nlohmann::json;

const char* SafetensorsDtype(DataType type) {
  switch (type) {
    case DataType::kFloat:
      return "F32";
    case DataType::kInt32:
      return "I32";
    case DataType::kInt64:
      return "I64";
    case DataType::kUInt8:
      return "U8";
    case DataType::kFloat16:
      return "F16";
    case DataType::kBFloat16:
      return "BF16";
    case DataType::kUndefined:
      break;
  }
  return nullptr;
}

bool ParseSafetensorsDtype(const std::string& name, DataType* type) {
  for (DataType candidate : {DataType::kFloat, DataType::kInt32, DataType::kInt64, DataType::kUInt8,
                             DataType::kFloat16, DataType::kBFloat16}) {
    if (name == SafetensorsDtype(candidate)) {
      *type = candidate;
      return true;
    }
  }
  return false;
}

[[noreturn]] void ThrowIo(const std::string& what, const std::string& path) {
  throw IoError(fmt::format("cannot {} {}: {}", what, path, std::strerror(errno)));
}

void WriteAll(int fd, const void* data, size_t size, const std::string& path) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t written = ::write(fd, bytes, size);
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) ThrowIo("write checkpoint", path);
    bytes += written;
    size -= static_cast<size_t>(written);
  }
}

// Reads exactly `size` bytes at `offset`; false when the file ends first.
bool ReadAllAt(int fd, void* data, size_t size, uint64_t offset, const std::string& path) {
  char* bytes = static_cast<char*>(data);
  while (size > 0) {
    ssize_t got = ::pread(fd, bytes, size, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) ThrowIo("read checkpoint", path);
    if (got == 0) return false;
    bytes += got;
    size -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return true;
}

// Closes the descriptor and removes the temporary file unless the write completed.
class TemporaryFile {
 public:
  explicit TemporaryFile(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) ThrowIo("create checkpoint", path_);
  }
  ~TemporaryFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }
  int fd() const { return fd_; }

  void SyncAndRename(const std::string& target) {
    if (::fsync(fd_) != 0) ThrowIo("sync checkpoint", path_);
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) ThrowIo("close checkpoint", path_);
    if (::rename(path_.c_str(), target.c_str()) != 0) ThrowIo(fmt::format("rename {} to", path_), target);
    committed_ = true;
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool committed_ = false;
};

// Makes the rename itself durable. Some filesystems cannot sync a directory; the rename is atomic regardless.
void SyncParentDirectory(const std::string& path) {
  auto slash = path.find_last_of('/');
  std::string directory = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

struct Entry {
  std::string name;
  DataType dtype;
  Shape shape;
  uint64_t begin, end;
};

class HeaderParser {
 public:
  HeaderParser(const std::string& path, uint64_t data_size) : path_(path), data_size_(data_size) {}

  [[noreturn]] void Fail(const std::string& what) const {
    throw InvalidInput(fmt::format("checkpoint {} {}", path_, what));
  }

  void Parse(const std::string& text, std::vector<Entry>* entries,
             std::map<std::string, std::string>* metadata) {
    Json header;
    try {
      header = Json::parse(text);
    } catch (const Json::parse_error& e) {
      Fail(fmt::format("has a header that is not valid JSON (error at byte {})", e.byte));
    } catch (const Json::exception& e) {  // valid syntax the parser refuses, e.g. the number 1e999
      Fail(fmt::format("has a header that cannot be read as JSON: {}", e.what()));
    }
    if (!header.is_object()) Fail("has a header that is not a JSON object");
    for (const auto& [name, value] : header.items()) {
      if (name == "__metadata__") {
        ParseMetadata(value, metadata);
      } else {
        entries->push_back(ParseEntry(name, value));
      }
    }
    CheckNoOverlap(*entries);
  }

 private:
  void ParseMetadata(const Json& value, std::map<std::string, std::string>* metadata) const {
    if (!value.is_object()) Fail("has a __metadata__ entry that is not an object");
    for (const auto& [key, item] : value.items()) {
      if (!item.is_string()) Fail(fmt::format("has metadata '{}' that is not a string", key));
      (*metadata)[key] = item.get<std::string>();
    }
  }

  Entry ParseEntry(const std::string& name, const Json& value) const {
    auto malformed = [&](const char* what) {
      Fail(fmt::format("has a malformed entry for tensor '{}': {}", name, what));
    };
    if (!value.is_object()) malformed("not an object");
    auto dtype = value.find("dtype");
    auto shape = value.find("shape");
    auto offsets = value.find("data_offsets");
    if (dtype == value.end() || !dtype->is_string()) malformed("'dtype' must be a string");
    if (shape == value.end() || !shape->is_array()) malformed("'shape' must be a list");
    if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 ||
        !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned())
      malformed("'data_offsets' must be two non-negative integers");

    Entry entry{name, DataType::kUndefined, {}, (*offsets)[0].get<uint64_t>(), (*offsets)[1].get<uint64_t>()};
    std::string dtype_name = dtype->get<std::string>();
    if (!ParseSafetensorsDtype(dtype_name, &entry.dtype))
      Fail(fmt::format("has tensor '{}' of unknown dtype '{}' (lockstep reads F32, I32, I64 and U8)", name,
                       dtype_name));

    // Bytes the shape needs. The product of the non-zero dims is bounded even when a zero dim makes the
    // tensor empty, so that no later product of the dims can overflow.
    const uint64_t limit = std::numeric_limits<int64_t>::max() / 8;
    uint64_t numel = 1;
    bool empty = false, huge = false;
    for (const auto& dim : *shape) {
      if (!dim.is_number_unsigned()) malformed("'shape' must hold non-negative integers");
      uint64_t d = dim.get<uint64_t>();
      entry.shape.push_back(static_cast<int64_t>(std::min(d, limit)));
      if (d == 0) {
        empty = true;
      } else if (numel > limit / d) {
        huge = true;
      } else {
        numel *= d;
      }
    }
    if (huge)
      Fail(fmt::format("has tensor '{}' of shape {} with more elements than any file can hold", name,
                       ShapeToString(entry.shape)));
    const uint64_t needed = empty ? 0 : numel * ElementSize(entry.dtype);
    if (entry.begin > entry.end)
      Fail(fmt::format("has tensor '{}' with data_offsets [{}, {}] that end before they begin", name,
                       entry.begin, entry.end));
    if (needed != entry.end - entry.begin)
      Fail(fmt::format("has tensor '{}' of shape {} {} that needs {} bytes but data_offsets [{}, {}] hold {}",
                       name, ShapeToString(entry.shape), dtype_name, needed, entry.begin, entry.end,
                       entry.end - entry.begin));
    if (entry.end > data_size_)
      Fail(fmt::format(
          "is truncated or corrupt: tensor '{}' ends at data byte {} but the file holds {} data bytes", name,
          entry.end, data_size_));
    return entry;
  }

  void CheckNoOverlap(const std::vector<Entry>& entries) const {
    std::vector<const Entry*> ranges;
    for (const auto& entry : entries)
      if (entry.end > entry.begin) ranges.push_back(&entry);
    std::sort(ranges.begin(), ranges.end(),
              [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
    for (size_t i = 1; i < ranges.size(); ++i)
      if (ranges[i]->begin < ranges[i - 1]->end)
        Fail(fmt::format("has overlapping tensors '{}' [{}, {}] and '{}' [{}, {}]", ranges[i - 1]->name,
                         ranges[i - 1]->begin, ranges[i - 1]->end, ranges[i]->name, ranges[i]->begin,
                         ranges[i]->end));
  }

  std::string path_;
  uint64_t data_size_;
};

}  // namespace

void WriteSafetensors(const std::string& path, const std::map<std::string, const Tensor*>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    LOCKSTEP_ENFORCE(tensor != nullptr, "tensor '{}' is null", name);
    if (name == "__metadata__")
      throw InvalidInput("a tensor may not be named __metadata__ in a safetensors file");
    const char* dtype = SafetensorsDtype(tensor->dtype());
    if (!dtype)
      throw InvalidInput(fmt::format("cannot save tensor '{}' to {}: it holds no data", name, path));
    LOCKSTEP_ENFORCE(tensor->is_plain(), "tensor '{}' is in a backend layout; save a plain copy (ToPlain)",
                     name);
    header[name] = {
        {"dtype", dtype}, {"shape", tensor->shape()}, {"data_offsets", {offset, offset + tensor->nbytes()}}};
    offset += tensor->nbytes();
  }
  // As the reference implementation does, pad with spaces so the data starts 8-byte aligned.
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  unsigned char length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));

  TemporaryFile file(fmt::format("{}.tmp.{}", path, ::getpid()));
  WriteAll(file.fd(), length, sizeof(length), path);
  WriteAll(file.fd(), text.data(), text.size(), path);
  for (const auto& entry : tensors)
    WriteAll(file.fd(), entry.second->raw_data(), entry.second->nbytes(), path);
  file.SyncAndRename(path);
  SyncParentDirectory(path);
}

namespace {

// An open safetensors file whose header has been read and validated; the tensors' bytes are not read yet.
struct OpenedFile {
  struct Descriptor {  // closed however the constructor ends
    int fd = -1;
    ~Descriptor() {
      if (fd >= 0) ::close(fd);
    }
  } descriptor;
  uint64_t data_start = 0;
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;

  explicit OpenedFile(const std::string& path) {
    descriptor.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (descriptor.fd < 0) ThrowIo("open checkpoint", path);
    struct stat info;
    if (::fstat(descriptor.fd, &info) != 0) ThrowIo("stat checkpoint", path);
    ReadHeader(path, static_cast<uint64_t>(info.st_size));
  }
  int fd() const { return descriptor.fd; }

  [[noreturn]] static void Fail(const std::string& path, const std::string& what) {
    throw InvalidInput(fmt::format("checkpoint {} {}", path, what));
  }

 private:
  void ReadHeader(const std::string& path, uint64_t file_size) {
    unsigned char length[8];
    if (file_size < sizeof(length) || !ReadAllAt(fd(), length, sizeof(length), 0, path))
      Fail(path,
           fmt::format("is truncated: it has {} bytes, fewer than the 8-byte header length", file_size));
    uint64_t header_size = 0;
    for (int i = 0; i < 8; ++i) header_size |= static_cast<uint64_t>(length[i]) << (8 * i);
    if (header_size > file_size - sizeof(length))
      Fail(path, fmt::format("is truncated: header says {} bytes, file has {}", header_size, file_size));

    std::string text(header_size, '\0');
    if (!ReadAllAt(fd(), text.data(), text.size(), sizeof(length), path))
      Fail(path, "is truncated: the file ended while reading its header");
    data_start = sizeof(length) + header_size;
    HeaderParser(path, file_size - data_start).Parse(text, &entries, &metadata);
  }
};

}  // namespace

SafetensorsFile ReadSafetensors(const std::string& path) {
  OpenedFile file(path);
  SafetensorsFile result;
  result.metadata = std::move(file.metadata);
  for (const auto& entry : file.entries) {
    Tensor& tensor = result.tensors[entry.name];
    tensor.Resize(entry.shape, entry.dtype);
    if (!ReadAllAt(file.fd(), tensor.raw_data(), tensor.nbytes(), file.data_start + entry.begin, path))
      OpenedFile::Fail(path,
                       fmt::format("is truncated: the file ended while reading tensor '{}'", entry.name));
  }
  return result;
}

std::map<std::string, std::string> ReadSafetensorsMetadata(const std::string& path) {
  return std::move(OpenedFile(path).metadata);
}

}  // namespace lockstep
