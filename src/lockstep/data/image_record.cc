// Datum and TensorProtos records to and from ImageRecord, with every check that a bad record needs to be
// reported by database and key rather than fail later inside image decoding.
#include "lockstep/data/image_record.h"

#include <fmt/format.h>

#include <limits>

#include "lockstep.pb.h"
#include "lockstep/core/enforce.h"

namespace lockstep {
namespace {

constexpr int64_t kMaxSide = int64_t{1} << 24;

std::string TypeName(int data_type) {
  return TensorProto::DataType_IsValid(data_type)
             ? TensorProto::DataType_Name(static_cast<TensorProto::DataType>(data_type))
             : fmt::format("{}", data_type);
}

bool IsLabelType(int data_type) {
  return data_type == TensorProto::INT32 || data_type == TensorProto::INT64 ||
         data_type == TensorProto::FLOAT;
}

// Names the record in every error, so that a bad record among millions can be found.
class RecordErrors {
 public:
  RecordErrors(const std::string& db, const std::string& key) : db_(db), key_(key) {}

  template <typename... Args>
  [[noreturn]] void Fail(fmt::format_string<Args...> format, Args&&... args) const {
    throw InvalidInput(
        fmt::format("record '{}' of {}: {}", key_, db_, fmt::format(format, std::forward<Args>(args)...)));
  }

  void CheckRawShape(int64_t channels, int64_t height, int64_t width, size_t bytes) const {
    if (channels != 1 && channels != 3)
      Fail("raw image with {} channels; only 1 (grey) or 3 (colour) are supported", channels);
    // The bound keeps channels * height * width far from overflow whatever a corrupt record says.
    if (height <= 0 || width <= 0 || height > kMaxSide || width > kMaxSide)
      Fail("raw image of height {} and width {}; each must be 1 to {}", height, width, kMaxSide);
    if (static_cast<int64_t>(bytes) != channels * height * width)
      Fail("raw image of {} x {} x {} needs {} bytes but holds {}", channels, height, width,
           channels * height * width, bytes);
  }

 private:
  const std::string& db_;
  const std::string& key_;
};

// Parsing into one message per thread, and swapping the pixel string out, lets the next parse reuse both
// buffers: no allocation per record once they have grown.
void FromDatum(Datum* datum, const RecordErrors& errors, ImageRecord* record) {
  if (datum->data().empty()) {
    if (datum->float_data_size() > 0)
      errors.Fail("Datum holds float_data, which is not supported; store the image as uint8 data");
    errors.Fail("Datum holds no image data");
  }
  record->label = datum->label();
  record->encoded = datum->encoded();
  if (record->encoded) {
    record->channels = record->height = record->width = 0;
  } else {
    errors.CheckRawShape(datum->channels(), datum->height(), datum->width(), datum->data().size());
    record->channels = datum->channels();
    record->height = datum->height();
    record->width = datum->width();
    record->layout = PixelLayout::kCHW;
  }
  record->bytes.swap(*datum->mutable_data());
}

int32_t LabelOf(const TensorProto& label, const RecordErrors& errors) {
  int64_t value = 0;
  int count = 0;
  if (label.data_type() == TensorProto::INT32) {
    count = label.int32_data_size();
    if (count == 1) value = label.int32_data(0);
  } else if (label.data_type() == TensorProto::INT64) {
    count = label.int64_data_size();
    if (count == 1) value = label.int64_data(0);
  } else {
    errors.Fail("label tensor of type {}; only INT32 or INT64 labels are supported",
                TypeName(label.data_type()));
  }
  if (count != 1) errors.Fail("label tensor holds {} values; only single labels are supported", count);
  if (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max())
    errors.Fail("label {} does not fit in int32", value);
  return static_cast<int32_t>(value);
}

void FromTensorProtos(TensorProtos* protos, const RecordErrors& errors, ImageRecord* record) {
  if (protos->protos_size() != 2)
    errors.Fail("TensorProtos with {} protos; expected 2 (image, label){}", protos->protos_size(),
                protos->protos_size() > 2 ? ": bounding boxes are not supported" : "");
  record->label = LabelOf(protos->protos(1), errors);
  TensorProto* image = protos->mutable_protos(0);
  int data_type = image->data_type();
  if (data_type == TensorProto::STRING) {
    if (image->string_data_size() != 1 || image->string_data(0).empty())
      errors.Fail("encoded image tensor holds {} strings; expected one image file",
                  image->string_data_size());
    record->encoded = true;
    record->channels = record->height = record->width = 0;
    record->bytes.swap(*image->mutable_string_data(0));
    return;
  }
  if (data_type != TensorProto::BYTE && data_type != TensorProto::UINT8)
    errors.Fail("image tensor of type {}; expected STRING (an encoded image) or BYTE (raw HWC pixels)",
                TypeName(data_type));
  if (image->dims_size() != 2 && image->dims_size() != 3)
    errors.Fail("raw image tensor with {} dims; expected (height, width) or (height, width, channels)",
                image->dims_size());
  int64_t height = image->dims(0), width = image->dims(1);
  int64_t channels = image->dims_size() == 3 ? image->dims(2) : 1;
  // make_image_db fills byte_data; other writers use raw_data, or int32_data as Caffe2 does for UINT8.
  std::string* pixels = !image->byte_data().empty() ? image->mutable_byte_data() : image->mutable_raw_data();
  if (pixels->empty() && image->int32_data_size() > 0) {
    pixels->resize(image->int32_data_size());
    for (int i = 0; i < image->int32_data_size(); ++i) {
      int32_t value = image->int32_data(i);
      if (value < 0 || value > 255) errors.Fail("raw image value {} at {} is not a byte", value, i);
      (*pixels)[i] = static_cast<char>(value);
    }
  }
  errors.CheckRawShape(channels, height, width, pixels->size());
  record->encoded = false;
  record->channels = static_cast<int>(channels);
  record->height = static_cast<int>(height);
  record->width = static_cast<int>(width);
  record->layout = PixelLayout::kHWC;
  record->bytes.swap(*pixels);
}

bool IsTensorProtos(const TensorProtos& protos) {
  return protos.protos_size() >= 2 && IsLabelType(protos.protos(1).data_type());
}

// Raw pixels of `record` in `layout`.
std::string PixelsIn(const ImageRecord& record, PixelLayout layout) {
  int64_t size = int64_t{record.channels} * record.height * record.width;
  LOCKSTEP_ENFORCE(
      !record.encoded && record.channels > 0 && static_cast<int64_t>(record.bytes.size()) == size,
      "raw record of {} x {} x {} holds {} bytes", record.channels, record.height, record.width,
      record.bytes.size());
  if (record.layout == layout) return record.bytes;
  std::string out(record.bytes.size(), '\0');
  size_t index = 0;
  if (layout == PixelLayout::kCHW) {
    for (int c = 0; c < record.channels; ++c)
      for (int y = 0; y < record.height; ++y)
        for (int x = 0; x < record.width; ++x) out[index++] = static_cast<char>(record.pixel(c, y, x));
  } else {
    for (int y = 0; y < record.height; ++y)
      for (int x = 0; x < record.width; ++x)
        for (int c = 0; c < record.channels; ++c) out[index++] = static_cast<char>(record.pixel(c, y, x));
  }
  return out;
}

}  // namespace

// Each format's name, written once for parsing and printing.
constexpr std::pair<RecordFormat, const char*> kRecordFormatNames[] = {
    {RecordFormat::kAuto, "auto"}, {RecordFormat::kDatum, "datum"}, {RecordFormat::kTensorProtos, "tensorprotos"}};

RecordFormat ParseRecordFormat(const std::string& name) {
  for (const auto& [format, known] : kRecordFormatNames)
    if (name == known) return format;
  throw InvalidInput(
      fmt::format("unknown record format '{}'; known formats: auto, datum, tensorprotos", name));
}

const char* RecordFormatName(RecordFormat format) {
  for (const auto& [known, name] : kRecordFormatNames)
    if (format == known) return name;
  return "unknown";
}

RecordFormat DetectRecordFormat(std::string_view value) {
  TensorProtos protos;
  bool parsed = protos.ParseFromArray(value.data(), static_cast<int>(value.size()));
  return parsed && IsTensorProtos(protos) ? RecordFormat::kTensorProtos : RecordFormat::kDatum;
}

void ParseImageRecord(std::string_view value, RecordFormat format, const std::string& db,
                      const std::string& key, ImageRecord* record) {
  RecordErrors errors(db, key);
  if (value.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
    errors.Fail("{} bytes; protobuf records hold at most 2 GiB", value.size());
  int size = static_cast<int>(value.size());
  thread_local TensorProtos protos;
  thread_local Datum datum;
  if (format != RecordFormat::kDatum) {
    bool parsed = protos.ParseFromArray(value.data(), size);
    if (format == RecordFormat::kTensorProtos) {
      if (!parsed)
        errors.Fail("does not parse as TensorProtos ({} bytes); is the record format right?", size);
      return FromTensorProtos(&protos, errors, record);
    }
    if (parsed && IsTensorProtos(protos)) return FromTensorProtos(&protos, errors, record);
  }
  bool parsed = datum.ParseFromArray(value.data(), size);
  if (format == RecordFormat::kDatum) {
    if (!parsed) errors.Fail("does not parse as a Datum ({} bytes); is the record format right?", size);
  } else if (!parsed || (datum.data().empty() && datum.float_data_size() == 0)) {
    throw InvalidInput(fmt::format("record '{}' of {} is not a Datum or TensorProtos: {} bytes that {}", key,
                                   db, size, parsed ? "hold no image" : "parse as neither"));
  }
  FromDatum(&datum, errors, record);
}

ImageRecord ParseImageRecord(std::string_view value, RecordFormat format, const std::string& db,
                             const std::string& key) {
  ImageRecord record;
  ParseImageRecord(value, format, db, key, &record);
  return record;
}

std::string MakeDatum(const ImageRecord& record) {
  Datum datum;
  datum.set_label(record.label);
  if (record.encoded) {
    datum.set_encoded(true);
    datum.set_data(record.bytes);
  } else {
    datum.set_channels(record.channels);
    datum.set_height(record.height);
    datum.set_width(record.width);
    datum.set_data(PixelsIn(record, PixelLayout::kCHW));
  }
  return datum.SerializeAsString();
}

std::string MakeTensorProtos(const ImageRecord& record) {
  TensorProtos protos;
  TensorProto* image = protos.add_protos();
  if (record.encoded) {
    image->set_data_type(TensorProto::STRING);
    image->add_dims(1);
    image->add_string_data(record.bytes);
  } else {
    image->set_data_type(TensorProto::BYTE);
    image->add_dims(record.height);
    image->add_dims(record.width);
    image->add_dims(record.channels);
    image->set_byte_data(PixelsIn(record, PixelLayout::kHWC));
  }
  TensorProto* label = protos.add_protos();
  label->set_data_type(TensorProto::INT32);
  label->add_dims(1);
  label->add_int32_data(record.label);
  return protos.SerializeAsString();
}

}  // namespace lockstep
