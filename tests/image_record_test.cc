// Image records: Datum and TensorProtos values written by hand in Python (tests/write_image_dbs.py) parse to
// the exact labels, pixels and encoded bytes; our serializers write what Caffe and Caffe2 write; every bad
// record is one error naming its database and key.
#include "lockstep/data/image_record.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lockstep.pb.h"
#include "lockstep/core/enforce.h"
#include "lockstep/data/db.h"
#include "python_written_dbs.h"
#include "shards.h"

namespace lockstep::testing {
namespace {

const std::string kDb = "/data/train_lmdb";
const std::string kKey = "key42";

std::string BytesOf(const nlohmann::json& list) {
  auto bytes = list.get<std::vector<uint8_t>>();
  return std::string(bytes.begin(), bytes.end());
}

// Expects parsing `value` to fail with one line naming kDb and kKey and holding `fragment`.
void ExpectBadRecord(const std::string& value, RecordFormat format, const std::string& fragment) {
  try {
    ParseImageRecord(value, format, kDb, kKey);
    ADD_FAILURE() << "parsed; expected an error holding '" << fragment << "'";
  } catch (const InvalidInput& error) {
    std::string message = error.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_NE(message.find("record 'key42' of /data/train_lmdb"), std::string::npos) << message;
    EXPECT_NE(message.find(fragment), std::string::npos) << message;
  }
}

ImageRecord RawRecord(int channels, int height, int width, PixelLayout layout, int32_t label) {
  ImageRecord record;
  record.label = label;
  record.channels = channels;
  record.height = height;
  record.width = width;
  record.layout = layout;
  for (int i = 0; i < channels * height * width; ++i) record.bytes.push_back(static_cast<char>(i * 7 + 3));
  return record;
}

void ExpectSamePixels(const ImageRecord& a, const ImageRecord& b) {
  ASSERT_EQ(a.channels, b.channels);
  ASSERT_EQ(a.height, b.height);
  ASSERT_EQ(a.width, b.width);
  for (int c = 0; c < a.channels; ++c)
    for (int y = 0; y < a.height; ++y)
      for (int x = 0; x < a.width; ++x)
        ASSERT_EQ(a.pixel(c, y, x), b.pixel(c, y, x)) << c << " " << y << " " << x;
}

class PythonWrittenRecordTest : public PythonWrittenDbs {};

// Each database through a cursor, each record parsed with the format detected and with it named: labels,
// shapes and raw pixels exact, encoded files byte for byte.
TEST_F(PythonWrittenRecordTest, LabelsPixelsAndEncodedBytes) {
  ASSERT_EQ(manifest_["databases"].size(), 8u);
  for (const auto& database : manifest_["databases"]) {
    std::string path = database["path"];
    RecordFormat format = database["format"] == "datum" ? RecordFormat::kDatum : RecordFormat::kTensorProtos;
    auto db = OpenDB(database["db_type"].get<std::string>(), path, DbMode::kRead);
    auto cursor = db->NewCursor();
    ImageRecord record;  // reused, as a reader reuses its buffer
    for (const auto& expected : database["records"]) {
      ASSERT_TRUE(cursor->valid());
      std::string key(cursor->key());
      SCOPED_TRACE(path + " " + key);
      EXPECT_EQ(DetectRecordFormat(cursor->value()), format);
      for (RecordFormat asked : {RecordFormat::kAuto, format}) {
        ParseImageRecord(cursor->value(), asked, path, key, &record);
        EXPECT_EQ(record.label, expected["label"].get<int32_t>());
        ASSERT_EQ(record.encoded, expected["encoded"].get<bool>());
        if (record.encoded) {
          EXPECT_EQ(record.bytes, BytesOf(expected["encoded_bytes"]));
          continue;
        }
        EXPECT_EQ(record.channels, expected["channels"].get<int>());
        EXPECT_EQ(record.height, expected["height"].get<int>());
        EXPECT_EQ(record.width, expected["width"].get<int>());
        EXPECT_EQ(record.layout, expected["layout"] == "CHW" ? PixelLayout::kCHW : PixelLayout::kHWC);
        EXPECT_EQ(record.bytes, BytesOf(expected["pixels"]));
      }
      cursor->Next();
    }
    EXPECT_FALSE(cursor->valid());
  }
}

// MakeDatum and MakeTensorProtos write, byte for byte, what the hand encoder wrote as Caffe and Caffe2 do;
// the one exception is a grey raw TensorProtos written with dims (height, width), which we write as
// (height, width, 1) and which must then parse to the same image.
TEST_F(PythonWrittenRecordTest, SerializersWriteWhatCaffeWrites) {
  for (const auto& database : manifest_["databases"]) {
    bool datum = database["format"] == "datum";
    for (const auto& expected : database["records"]) {
      std::string key = expected["key"];
      SCOPED_TRACE(database["path"].get<std::string>() + " " + key);
      std::string value = BytesOf(expected["value_bytes"]);
      std::string path = database["path"];
      ImageRecord record = ParseImageRecord(value, RecordFormat::kAuto, path, key);
      std::string written = datum ? MakeDatum(record) : MakeTensorProtos(record);
      ImageRecord reparsed = ParseImageRecord(written, RecordFormat::kAuto, "written", key);
      EXPECT_EQ(reparsed.label, record.label);
      EXPECT_EQ(reparsed.encoded, record.encoded);
      EXPECT_EQ(reparsed.bytes, record.bytes);
      EXPECT_EQ(reparsed.layout, record.layout);
      bool two_dims = !datum && !record.encoded && record.channels == 1 && written.size() != value.size();
      if (!two_dims) EXPECT_EQ(written, value);
    }
  }
}

TEST_F(PythonWrittenRecordTest, TruncatedRecords) {
  for (const auto& database : manifest_["databases"]) {
    RecordFormat format = database["format"] == "datum" ? RecordFormat::kDatum : RecordFormat::kTensorProtos;
    for (const auto& expected : database["records"]) {
      std::string value = BytesOf(expected["value_bytes"]);
      SCOPED_TRACE(database["path"].get<std::string>() + " " + expected["key"].get<std::string>());
      for (size_t length : {value.size() / 2, value.size() - 1}) {
        std::string truncated = value.substr(0, length);
        ExpectBadRecord(truncated, RecordFormat::kAuto, "");
        ExpectBadRecord(truncated, format, "");
      }
    }
  }
}

TEST(ImageRecordTest, GarbageIsNeitherFormat) {
  ExpectBadRecord("this is no record", RecordFormat::kAuto, "is not a Datum or TensorProtos");
  ExpectBadRecord(std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11), RecordFormat::kAuto,
                  "is not a Datum or TensorProtos");
  ExpectBadRecord("", RecordFormat::kAuto, "hold no image");
  ExpectBadRecord("this is no record", RecordFormat::kDatum, "does not parse as a Datum");
  ExpectBadRecord("this is no record", RecordFormat::kTensorProtos, "does not parse as TensorProtos");
}

TEST(ImageRecordTest, WrongFormatNamed) {
  std::string datum = MakeDatum(RawRecord(3, 2, 2, PixelLayout::kCHW, 1));
  std::string protos = MakeTensorProtos(RawRecord(3, 2, 2, PixelLayout::kHWC, 1));
  ExpectBadRecord(datum, RecordFormat::kTensorProtos, "TensorProtos with 0 protos");
  ExpectBadRecord(protos, RecordFormat::kDatum, "Datum holds no image data");
}

TEST(ImageRecordTest, BadDatums) {
  Datum datum;
  datum.set_channels(1);
  datum.set_height(2);
  datum.set_width(2);
  datum.add_float_data(0.5f);
  ExpectBadRecord(datum.SerializeAsString(), RecordFormat::kAuto, "float_data, which is not supported");
  datum.clear_float_data();
  datum.set_data("abc");
  ExpectBadRecord(datum.SerializeAsString(), RecordFormat::kAuto, "1 x 2 x 2 needs 4 bytes but holds 3");
  datum.set_channels(2);
  datum.set_data(std::string(8, 'x'));
  ExpectBadRecord(datum.SerializeAsString(), RecordFormat::kAuto, "2 channels");
  datum.set_channels(1);
  datum.set_height(0);
  datum.set_data("");
  datum.set_encoded(true);
  ExpectBadRecord(datum.SerializeAsString(), RecordFormat::kDatum, "holds no image data");
}

TEST(ImageRecordTest, BadTensorProtos) {
  auto make = [](int image_type, int label_type) {
    TensorProtos protos;
    TensorProto* image = protos.add_protos();
    image->set_data_type(static_cast<TensorProto::DataType>(image_type));
    for (int dim : {2, 2, 3}) image->add_dims(dim);
    image->set_byte_data(std::string(12, 'p'));
    TensorProto* label = protos.add_protos();
    label->set_data_type(static_cast<TensorProto::DataType>(label_type));
    label->add_int32_data(4);
    return protos;
  };
  EXPECT_EQ(ParseImageRecord(make(TensorProto::BYTE, TensorProto::INT32).SerializeAsString(),
                             RecordFormat::kAuto, kDb, kKey)
                .label,
            4);
  ExpectBadRecord(make(TensorProto::FLOAT, TensorProto::INT32).SerializeAsString(), RecordFormat::kAuto,
                  "image tensor of type FLOAT");
  TensorProtos float_label = make(TensorProto::BYTE, TensorProto::FLOAT);
  float_label.mutable_protos(1)->add_float_data(1.0f);
  ExpectBadRecord(float_label.SerializeAsString(), RecordFormat::kAuto, "label tensor of type FLOAT");
  TensorProtos two_labels = make(TensorProto::BYTE, TensorProto::INT32);
  two_labels.mutable_protos(1)->add_int32_data(5);
  ExpectBadRecord(two_labels.SerializeAsString(), RecordFormat::kAuto, "label tensor holds 2 values");
  TensorProtos large_label = make(TensorProto::BYTE, TensorProto::INT64);
  large_label.mutable_protos(1)->add_int64_data(int64_t{1} << 40);
  ExpectBadRecord(large_label.SerializeAsString(), RecordFormat::kAuto, "does not fit in int32");
  TensorProtos box = make(TensorProto::BYTE, TensorProto::INT32);
  box.add_protos()->set_data_type(TensorProto::INT32);
  ExpectBadRecord(box.SerializeAsString(), RecordFormat::kAuto, "bounding boxes are not supported");
  TensorProtos short_pixels = make(TensorProto::BYTE, TensorProto::INT32);
  short_pixels.mutable_protos(0)->set_byte_data("p");
  ExpectBadRecord(short_pixels.SerializeAsString(), RecordFormat::kAuto, "needs 12 bytes but holds 1");
  TensorProtos four_dims = make(TensorProto::BYTE, TensorProto::INT32);
  four_dims.mutable_protos(0)->add_dims(1);
  ExpectBadRecord(four_dims.SerializeAsString(), RecordFormat::kAuto, "raw image tensor with 4 dims");
  TensorProtos huge = make(TensorProto::BYTE, TensorProto::INT32);
  huge.mutable_protos(0)->set_dims(0, int64_t{1} << 40);
  huge.mutable_protos(0)->set_dims(1, int64_t{1} << 40);
  ExpectBadRecord(huge.SerializeAsString(), RecordFormat::kAuto, "each must be 1 to 16777216");
  TensorProtos no_string = make(TensorProto::STRING, TensorProto::INT32);
  ExpectBadRecord(no_string.SerializeAsString(), RecordFormat::kAuto, "holds 0 strings");
}

// Caffe2 stores UINT8 tensors in int32_data and other writers use raw_data; both read as pixels.
TEST(ImageRecordTest, OtherPixelFields) {
  TensorProtos protos;
  TensorProto* image = protos.add_protos();
  image->set_data_type(TensorProto::UINT8);
  image->add_dims(1);
  image->add_dims(2);
  for (int value : {0, 255}) image->add_int32_data(value);
  TensorProto* label = protos.add_protos();
  label->set_data_type(TensorProto::INT64);
  label->add_int64_data(-3);
  ImageRecord record = ParseImageRecord(protos.SerializeAsString(), RecordFormat::kAuto, kDb, kKey);
  EXPECT_EQ(record.label, -3);
  EXPECT_EQ(record.bytes, std::string("\x00\xff", 2));
  EXPECT_EQ(record.channels, 1);
  EXPECT_EQ(record.layout, PixelLayout::kHWC);
  image->clear_int32_data();
  image->set_raw_data("ab");
  EXPECT_EQ(ParseImageRecord(protos.SerializeAsString(), RecordFormat::kAuto, kDb, kKey).bytes, "ab");
  image->clear_raw_data();
  image->add_int32_data(7);
  image->add_int32_data(256);
  ExpectBadRecord(protos.SerializeAsString(), RecordFormat::kAuto, "raw image value 256 at 1 is not a byte");
}

// Each serializer reorders raw pixels to its own layout; pixel(c, y, x) reads the same image either way.
TEST(ImageRecordTest, SerializersReorderPixels) {
  for (PixelLayout layout : {PixelLayout::kCHW, PixelLayout::kHWC}) {
    ImageRecord original = RawRecord(3, 4, 5, layout, 17);
    ImageRecord from_datum = ParseImageRecord(MakeDatum(original), RecordFormat::kAuto, kDb, kKey);
    ImageRecord from_protos = ParseImageRecord(MakeTensorProtos(original), RecordFormat::kAuto, kDb, kKey);
    EXPECT_EQ(from_datum.layout, PixelLayout::kCHW);
    EXPECT_EQ(from_protos.layout, PixelLayout::kHWC);
    EXPECT_EQ(from_datum.label, 17);
    EXPECT_EQ(from_protos.label, 17);
    ExpectSamePixels(from_datum, original);
    ExpectSamePixels(from_protos, original);
  }
  ImageRecord encoded;
  encoded.label = -2;
  encoded.encoded = true;
  encoded.bytes = "\x89PNG not really";
  for (const std::string& value : {MakeDatum(encoded), MakeTensorProtos(encoded)}) {
    ImageRecord parsed = ParseImageRecord(value, RecordFormat::kAuto, kDb, kKey);
    EXPECT_TRUE(parsed.encoded);
    EXPECT_EQ(parsed.bytes, encoded.bytes);
    EXPECT_EQ(parsed.label, -2);
  }
}

TEST(ImageRecordTest, FormatNames) {
  for (RecordFormat format : {RecordFormat::kAuto, RecordFormat::kDatum, RecordFormat::kTensorProtos})
    EXPECT_EQ(ParseRecordFormat(RecordFormatName(format)), format);
  try {
    ParseRecordFormat("protobuf");
    ADD_FAILURE() << "no error";
  } catch (const InvalidInput& error) {
    EXPECT_NE(std::string(error.what()).find("auto, datum, tensorprotos"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace lockstep::testing
