// Safetensors reader and writer over POSIX files: the writer syncs before renaming (an interrupted save never
// replaces a good checkpoint) and records CRC32s of the header and of every tensor in the metadata; the
// reader validates the whole header before reading any tensor bytes, and checks every CRC32 it finds.
#include "lockstep/train/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "lockstep/core/atomic_file.h"

namespace lockstep {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors stores little-endian bytes as they are");

using Json = nlohmann::json;

// Metadata keys of the checksums: "crc32:<tensor>" for each tensor's bytes, and kHeaderChecksum for the
// header without that key (as nlohmann's compact dump writes it: sorted keys, so a reader can compute it
// again). Both are the zlib CRC32 (what Python's zlib.crc32 computes) as 8 hex digits.
constexpr const char* kTensorChecksumPrefix = "crc32:";
constexpr const char* kHeaderChecksum = "header_crc32";

uint32_t Crc32(const void* data, size_t size, uint32_t crc = 0) {
  return static_cast<uint32_t>(crc32_z(crc, static_cast<const Bytef*>(data), size));
}

std::string ChecksumText(uint32_t crc) { return fmt::format("{:08x}", crc); }

// The text the header's checksum covers: compact, keys sorted; bytes that are not UTF-8 (damage) become
// U+FFFD instead of stopping the dump, so that they fail the checksum.
std::string CanonicalText(const Json& header) {
  return header.dump(-1, ' ', false, Json::error_handler_t::replace);
}

bool IsChecksumKey(const std::string& key) {
  return key == kHeaderChecksum || key.rfind(kTensorChecksumPrefix, 0) == 0;
}

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
  ThrowErrno(fmt::format("cannot {} {}", what, path));
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

struct Entry {
  std::string name;
  DataType dtype;
  Shape shape;
  uint64_t begin, end;
  std::optional<uint32_t> checksum = std::nullopt;  // from the metadata; none in files written without them
};

class HeaderParser {
 public:
  HeaderParser(const std::string& path, uint64_t data_size) : path_(path), data_size_(data_size) {}

  [[noreturn]] void Fail(const std::string& what) const {
    throw InvalidInput(fmt::format("checkpoint {} {}", path_, what));
  }

  void Parse(const std::string& text, std::vector<Entry>* entries,
             std::map<std::string, std::string>* metadata) {
    // The parser would take a NUL for the end of the text; in JSON it can only be damage.
    if (text.find('\0') != std::string::npos) Fail("is corrupt: its header holds a NUL byte");
    Json header;
    try {
      header = Json::parse(text);
    } catch (const Json::parse_error& e) {
      Fail(fmt::format("has a header that is not valid JSON (error at byte {})", e.byte));
    } catch (const Json::exception& e) {  // valid syntax the parser refuses, e.g. the number 1e999
      Fail(fmt::format("has a header that cannot be read as JSON: {}", e.what()));
    }
    if (!header.is_object()) Fail("has a header that is not a JSON object");
    CheckHeaderChecksum(&header);
    for (const auto& [name, value] : header.items()) {
      if (name == "__metadata__") {
        ParseMetadata(value, metadata);
      } else {
        entries->push_back(ParseEntry(name, value));
      }
    }
    CheckNoOverlap(*entries);
    TakeTensorChecksums(entries, metadata);
  }

 private:
  // Compares the header's CRC32 with the one it records, if any, and removes that from the header.
  void CheckHeaderChecksum(Json* header) {
    auto metadata = header->find("__metadata__");
    if (metadata == header->end() || !metadata->is_object()) return;
    auto recorded = metadata->find(kHeaderChecksum);
    if (recorded == metadata->end()) return;
    const std::string text = recorded->is_string() ? recorded->get<std::string>() : "";
    metadata->erase(recorded);
    has_header_checksum_ = true;
    const std::string dump = CanonicalText(*header);
    const std::string actual = ChecksumText(Crc32(dump.data(), dump.size()));
    if (actual != text)
      Fail(fmt::format("is corrupt: its header has CRC32 {} but records {}; take an earlier checkpoint",
                       actual, text));
  }

  // Moves the "crc32:<tensor>" metadata onto the entries. A file whose header is checksummed must have one
  // for every tensor and none for a tensor it does not hold.
  void TakeTensorChecksums(std::vector<Entry>* entries, std::map<std::string, std::string>* metadata) const {
    std::map<std::string, Entry*> by_name;
    for (Entry& entry : *entries) by_name[entry.name] = &entry;
    const std::string prefix = kTensorChecksumPrefix;
    for (auto it = metadata->begin(); it != metadata->end();) {
      if (it->first.rfind(prefix, 0) != 0) {
        ++it;
        continue;
      }
      const std::string name = it->first.substr(prefix.size());
      auto entry = by_name.find(name);
      if (entry == by_name.end())
        Fail(fmt::format("is corrupt: it has a checksum of '{}', a tensor it does not hold", name));
      uint32_t checksum = 0;
      const std::string& text = it->second;
      auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), checksum, 16);
      if (text.size() != 8 || error != std::errc() || end != text.data() + text.size())
        Fail(fmt::format("is corrupt: the checksum of tensor '{}' is '{}', not 8 hex digits", name, text));
      entry->second->checksum = checksum;
      it = metadata->erase(it);
    }
    if (!has_header_checksum_) {
      if (std::any_of(entries->begin(), entries->end(),
                      [](const Entry& e) { return e.checksum.has_value(); }))
        Fail(fmt::format("is corrupt: it has tensor checksums but no '{}'", kHeaderChecksum));
      return;
    }
    for (const Entry& entry : *entries)
      if (!entry.checksum) Fail(fmt::format("is corrupt: tensor '{}' has no checksum", entry.name));
  }

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
  bool has_header_checksum_ = false;
};

}  // namespace

void WriteSafetensors(const std::string& path, const std::map<std::string, const Tensor*>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  Json& header_metadata = header["__metadata__"] = Json::object();
  for (const auto& [key, value] : metadata) {
    LOCKSTEP_ENFORCE(!IsChecksumKey(key), "metadata key '{}' is reserved for checksums", key);
    header_metadata[key] = value;
  }
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
    header_metadata[kTensorChecksumPrefix + name] = ChecksumText(Crc32(tensor->raw_data(), tensor->nbytes()));
    offset += tensor->nbytes();
  }
  const std::string checksummed = CanonicalText(header);
  header_metadata[kHeaderChecksum] = ChecksumText(Crc32(checksummed.data(), checksummed.size()));
  // As the reference implementation does, pad with spaces so the data starts 8-byte aligned.
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  unsigned char length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));

  AtomicFile file(path, "checkpoint");
  file.Write(length, sizeof(length));
  file.Write(text);
  for (const auto& entry : tensors) file.Write(entry.second->raw_data(), entry.second->nbytes());
  file.Commit();
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
    // A path that names no file stays wrong however often the command runs again.
    if (descriptor.fd < 0 && (errno == ENOENT || errno == ENOTDIR))
      Fail(path, "does not exist; check the path");
    if (descriptor.fd < 0) ThrowIo("open checkpoint", path);
    struct stat info;
    if (::fstat(descriptor.fd, &info) != 0) ThrowIo("stat checkpoint", path);
    if (S_ISDIR(info.st_mode)) Fail(path, "is a directory; name a .safetensors file in it");
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
    if (header_size > file_size - sizeof(length)) {
      // A safetensors header is JSON, so its first byte is '{'; without it the file is something else.
      char first = 0;
      if (file_size > sizeof(length) && ReadAllAt(fd(), &first, 1, sizeof(length), path) && first != '{')
        Fail(path, "is not a safetensors file: no JSON header follows its first 8 bytes");
      Fail(path, fmt::format("is truncated: header says {} bytes, file has {}", header_size, file_size));
    }

    std::string text(header_size, '\0');
    if (!ReadAllAt(fd(), text.data(), text.size(), sizeof(length), path))
      Fail(path, "is truncated: the file ended while reading its header");
    data_start = sizeof(length) + header_size;
    HeaderParser(path, file_size - data_start).Parse(text, &entries, &metadata);
  }
};

}  // namespace

namespace {

// Reads the entry's bytes into `data` (entry.end - entry.begin of them) and checks them against its checksum;
// `crc` carries the checksum of the bytes before these when a tensor is read in pieces.
void ReadEntryBytes(const OpenedFile& file, const Entry& entry, uint64_t offset, void* data, size_t size,
                    uint32_t* crc, const std::string& path) {
  if (!ReadAllAt(file.fd(), data, size, file.data_start + entry.begin + offset, path))
    OpenedFile::Fail(path, fmt::format("is truncated: the file ended while reading tensor '{}'", entry.name));
  *crc = Crc32(data, size, *crc);
}

void CheckEntryChecksum(const Entry& entry, uint32_t crc, const std::string& path) {
  if (entry.checksum && *entry.checksum != crc)
    OpenedFile::Fail(path,
                     fmt::format("is corrupt: tensor '{}' has CRC32 {} but the file records {}; take an "
                                 "earlier checkpoint",
                                 entry.name, ChecksumText(crc), ChecksumText(*entry.checksum)));
}

}  // namespace

SafetensorsFile ReadSafetensors(const std::string& path) {
  OpenedFile file(path);
  SafetensorsFile result;
  result.metadata = std::move(file.metadata);
  for (const auto& entry : file.entries) {
    Tensor& tensor = result.tensors[entry.name];
    tensor.Resize(entry.shape, entry.dtype);
    uint32_t crc = 0;
    ReadEntryBytes(file, entry, 0, tensor.raw_data(), tensor.nbytes(), &crc, path);
    CheckEntryChecksum(entry, crc, path);
  }
  return result;
}

void VerifySafetensors(const std::string& path) {
  OpenedFile file(path);
  std::vector<char> buffer(size_t{4} << 20);
  for (const auto& entry : file.entries) {
    uint32_t crc = 0;
    for (uint64_t offset = 0; offset < entry.end - entry.begin; offset += buffer.size()) {
      const size_t size =
          static_cast<size_t>(std::min<uint64_t>(buffer.size(), entry.end - entry.begin - offset));
      ReadEntryBytes(file, entry, offset, buffer.data(), size, &crc, path);
    }
    CheckEntryChecksum(entry, crc, path);
  }
}

std::map<std::string, std::string> ReadSafetensorsMetadata(const std::string& path) {
  return std::move(OpenedFile(path).metadata);
}

}  // namespace lockstep
