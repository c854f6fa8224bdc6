// idx files (MNIST, Fashion-MNIST): parsing, and the checks that refuse a corrupt header before it is used.
#include "lockstep/data/idx_dataset.h"

#include <gtest/gtest.h>

#include "lockstep/core/enforce.h"

namespace lockstep {
namespace {

void AppendBigEndian32(std::vector<uint8_t>* bytes, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) bytes->push_back(static_cast<uint8_t>(value >> shift));
}

std::vector<uint8_t> ImageFile(uint32_t count, uint32_t height, uint32_t width, size_t pixels) {
  std::vector<uint8_t> bytes;
  for (uint32_t value : {0x803u, count, height, width}) AppendBigEndian32(&bytes, value);
  for (size_t i = 0; i < pixels; ++i) bytes.push_back(static_cast<uint8_t>(i));
  return bytes;
}

std::vector<uint8_t> LabelFile(uint32_t count) {
  std::vector<uint8_t> bytes;
  for (uint32_t value : {0x801u, count}) AppendBigEndian32(&bytes, value);
  for (uint32_t i = 0; i < count; ++i) bytes.push_back(static_cast<uint8_t>(i % 10));
  return bytes;
}

TEST(IdxDataset, ParsesImagesAndLabels) {
  ImageDataset dataset = ParseIdxDataset(ImageFile(2, 3, 4, 24), "images", LabelFile(2), "labels");
  EXPECT_EQ(dataset.size(), 2);
  EXPECT_EQ(dataset.channels, 1);
  EXPECT_EQ(dataset.height, 3);
  EXPECT_EQ(dataset.width, 4);
  ASSERT_EQ(dataset.pixels.size(), 24u);
  EXPECT_EQ(dataset.pixels[23], 23);
  EXPECT_EQ(dataset.labels, (std::vector<int32_t>{0, 1}));
}

TEST(IdxDataset, RefusesBadMagicAndTruncatedFiles) {
  auto images = ImageFile(2, 3, 4, 24);
  images[3] = 0x01;
  EXPECT_THROW(ParseIdxDataset(images, "images", LabelFile(2), "labels"), InvalidInput);
  EXPECT_THROW(ParseIdxDataset(ImageFile(2, 3, 4, 23), "images", LabelFile(2), "labels"), InvalidInput);
  EXPECT_THROW(ParseIdxDataset(ImageFile(2, 3, 4, 24), "images", LabelFile(3), "labels"), InvalidInput);
}

// Sizes that came from the header used to be cast to int and multiplied unchecked: 0xFFFFFFFF x 0xFFFFFFFF
// became -1 x -1 = 1 byte per image, and 2^31 - 1 squared overflowed int64.
TEST(IdxDataset, RefusesImageSizesOutOfRange) {
  EXPECT_THROW(ParseIdxDataset(ImageFile(1, 0xFFFFFFFF, 0xFFFFFFFF, 1), "images", LabelFile(1), "labels"),
               InvalidInput);
  EXPECT_THROW(ParseIdxDataset(ImageFile(2, 0x7FFFFFFF, 0x7FFFFFFF, 0), "images", LabelFile(2), "labels"),
               InvalidInput);
  EXPECT_THROW(ParseIdxDataset(ImageFile(1, 0, 4, 0), "images", LabelFile(1), "labels"), InvalidInput);
}

}  // namespace
}  // namespace lockstep
