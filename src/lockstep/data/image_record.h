// One image database record: parsed from Caffe's Datum or Caffe2's TensorProtos (as convert_imageset and
// make_image_db write them) into a label plus either an encoded image file or raw pixels, and serialized
// back.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "lockstep/data/image.h"

namespace lockstep {

// How raw pixels are ordered: Datum stores planes (CHW), TensorProtos interleaved channels (HWC).
enum class PixelLayout { kCHW, kHWC };

// The colour order of raw records. convert_imageset and make_image_db go through OpenCV and store B, G, R,
// and lockstep's make-db writes the same; encoded records decode to kDecodedColorOrder instead.
inline constexpr ColorOrder kRawColorOrder = ColorOrder::kBgr;

struct ImageRecord {
  int32_t label = 0;
  bool encoded = false;  // bytes is a whole JPEG or PNG file; else raw uint8 pixels
  std::string bytes;
  // Raw pixels only: bytes holds channels * height * width values in `layout`.
  int channels = 0, height = 0, width = 0;
  PixelLayout layout = PixelLayout::kCHW;

  uint8_t pixel(int c, int y, int x) const {
    size_t index = layout == PixelLayout::kCHW ? (size_t(c) * height + y) * width + x
                                               : (size_t(y) * width + x) * channels + c;
    return static_cast<uint8_t>(bytes[index]);
  }
};

// kAuto tells the two formats apart by one rule: a value is TensorProtos when it parses as one with at least
// two protos and the second has a label's type (INT32, INT64 or FLOAT); otherwise it is a Datum. The rule
// cannot misread a Datum: Datum's field 1 (channels) is a varint where TensorProtos' field 1 is a message, so
// a Datum parses as a TensorProtos with no protos at all.
enum class RecordFormat { kAuto, kDatum, kTensorProtos };

// The format of one value by the kAuto rule (never kAuto). A reader may call it on its first record and pass
// the answer for the rest, which spares a trial parse per record.
RecordFormat DetectRecordFormat(std::string_view value);

// "auto", "datum", "tensorprotos"; anything else is InvalidInput listing those.
RecordFormat ParseRecordFormat(const std::string& name);
const char* RecordFormatName(RecordFormat format);

// Parses `value`, the record stored under `key` in database `db` (both only name the record in errors), into
// `record`, reusing its buffer. Throws InvalidInput naming db and key for a value that does not parse, a
// Datum with float_data, raw pixels whose count disagrees with their shape or with other than 1 or 3
// channels, a label that is not one integer, or a bounding box (a third proto, which Caffe2 crops to and we
// do not).
void ParseImageRecord(std::string_view value, RecordFormat format, const std::string& db,
                      const std::string& key, ImageRecord* record);
ImageRecord ParseImageRecord(std::string_view value, RecordFormat format, const std::string& db,
                             const std::string& key);

// Serialized records as convert_imageset (Datum) and make_image_db (TensorProtos) write them. Raw pixels are
// reordered to the format's own layout (CHW for Datum, HWC for TensorProtos) when the record has the other.
std::string MakeDatum(const ImageRecord& record);
std::string MakeTensorProtos(const ImageRecord& record);

}  // namespace lockstep
