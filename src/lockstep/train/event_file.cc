// TensorBoard event files.
#include "lockstep/train/event_file.h"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "lockstep/comm/rendezvous.h"
#include "lockstep/core/enforce.h"
#include "tensorboard.pb.h"

namespace lockstep {
namespace {

double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

tensorboard::Event EventAt(int64_t step) {
  tensorboard::Event event;
  event.set_wall_time(UnixSeconds());
  event.set_step(step);
  return event;
}

}  // namespace

uint32_t Crc32c(const void* data, size_t size) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t crc = i;
      for (int bit = 0; bit < 8; ++bit) crc = crc & 1 ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;  // reflected
      t[i] = crc;
    }
    return t;
  }();
  uint32_t crc = ~0u;
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ bytes[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

uint32_t MaskedCrc32c(const void* data, size_t size) {
  const uint32_t crc = Crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

EventFile::EventFile(const std::string& directory) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error)
    throw IoError(fmt::format("--tensorboard_dir {}: cannot create it: {}", directory, error.message()));
  path_ = fmt::format("{}/events.out.tfevents.{}.{}.{}", directory, static_cast<int64_t>(UnixSeconds()),
                      HostName(), getpid());
  file_ = std::fopen(path_.c_str(), "wbx");  // never over another run's file
  if (!file_)
    throw IoError(fmt::format("--tensorboard_dir: cannot create {}: {}", path_, std::strerror(errno)));
  tensorboard::Event version = EventAt(0);
  version.set_file_version("brain.Event:2");
  WriteRecord(version.SerializeAsString());
}

EventFile::~EventFile() {
  if (file_) std::fclose(file_);
}

void EventFile::Scalar(const std::string& tag, int64_t step, double value) {
  tensorboard::Event event = EventAt(step);
  tensorboard::Summary::Value* entry = event.mutable_summary()->add_value();
  entry->set_tag(tag);
  entry->set_simple_value(static_cast<float>(value));
  WriteRecord(event.SerializeAsString());
}

void EventFile::Text(const std::string& tag, int64_t step, const std::string& markdown) {
  constexpr int kStringDtype = 7;  // TensorFlow's DT_STRING
  tensorboard::Event event = EventAt(step);
  tensorboard::Summary::Value* entry = event.mutable_summary()->add_value();
  entry->set_tag(tag);
  entry->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  entry->mutable_tensor()->set_dtype(kStringDtype);
  entry->mutable_tensor()->add_string_val(markdown);
  WriteRecord(event.SerializeAsString());
}

void EventFile::WriteRecord(const std::string& event) {
  unsigned char header[12];
  const uint64_t length = event.size();  // little-endian, as the framing wants, on every host lockstep runs on
  std::memcpy(header, &length, 8);
  const uint32_t length_crc = MaskedCrc32c(header, 8);
  std::memcpy(header + 8, &length_crc, 4);
  const uint32_t event_crc = MaskedCrc32c(event.data(), event.size());
  if (std::fwrite(header, 1, sizeof(header), file_) != sizeof(header) ||
      std::fwrite(event.data(), 1, event.size(), file_) != event.size() ||
      std::fwrite(&event_crc, 1, 4, file_) != 4 || std::fflush(file_) != 0)
    throw IoError(fmt::format("--tensorboard_dir: cannot write {}: {}", path_, std::strerror(errno)));
}

}  // namespace lockstep
