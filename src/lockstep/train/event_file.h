// TensorBoard event files: what `--tensorboard_dir` writes, for TensorBoard to plot the run as it goes.
// Records are framed as TFRecords (length, masked CRC32C of the length, an Event message
// (proto/tensorboard.proto), masked CRC32C of the message) and flushed as written, so that a live TensorBoard
// follows the run and a killed one keeps every record but possibly the last, which readers skip.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace lockstep {

class EventFile {
 public:
  // Creates `directory` (and its parents) and in it "events.out.tfevents.<unix seconds>.<host>.<pid>", the
  // name TensorBoard looks for, starting with the file-version event. Throws IoError.
  explicit EventFile(const std::string& directory);
  ~EventFile();
  EventFile(const EventFile&) = delete;
  EventFile& operator=(const EventFile&) = delete;

  void Scalar(const std::string& tag, int64_t step, double value);
  // Markdown, shown by TensorBoard's text tab.
  void Text(const std::string& tag, int64_t step, const std::string& markdown);
  const std::string& path() const { return path_; }

 private:
  void WriteRecord(const std::string& event);

  std::string path_;
  FILE* file_ = nullptr;
};

// CRC-32C (Castagnoli), as TFRecord framing uses it, and its masked form (rotated and offset, so that the CRC
// of data holding CRCs stays well spread).
uint32_t Crc32c(const void* data, size_t size);
uint32_t MaskedCrc32c(const void* data, size_t size);

}  // namespace lockstep
