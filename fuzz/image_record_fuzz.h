// The body of the record fuzzers: parse one database value, then use the record as a reader would (decode
// an encoded image, read every raw pixel) and write it back in both formats.
#pragma once

#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "lockstep/core/enforce.h"
#include "lockstep/data/image.h"
#include "lockstep/data/image_record.h"

// protobuf logs each value that misses a required field before the parse fails; a line per input would drown
// the fuzzer's output.
inline const bool kProtobufLogSilenced = [] {
  google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char*, int, const std::string&) {});
  return true;
}();

inline void FuzzImageRecord(const uint8_t* data, size_t size, lockstep::RecordFormat format) {
  std::string_view value(reinterpret_cast<const char*>(data), size);
  lockstep::ImageRecord record;
  try {
    lockstep::ParseImageRecord(value, format, "fuzz", "key", &record);
  } catch (const lockstep::InvalidInput&) {
    return;
  }
  if (record.encoded) {
    try {
      lockstep::DecodeImage(reinterpret_cast<const uint8_t*>(record.bytes.data()), record.bytes.size(), 3);
    } catch (const lockstep::InvalidInput&) {
    }
  } else {
    unsigned sum = 0;
    for (int c = 0; c < record.channels; ++c)
      for (int y = 0; y < record.height; ++y)
        for (int x = 0; x < record.width; ++x) sum += record.pixel(c, y, x);
    if (sum > 255u * record.bytes.size()) __builtin_trap();
  }
  lockstep::MakeDatum(record);
  lockstep::MakeTensorProtos(record);
}
