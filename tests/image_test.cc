// Image decode, encode and resize: PNGs of every colour type decode to their exact pixels, JPEGs to what
// Pillow decodes, the bilinear resize matches Pillow's, and truncated or foreign bytes give one clear error.
#include "lockstep/data/image.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>

#include "lockstep/core/enforce.h"
#include "python_reference.h"
#include "shards.h"

namespace lockstep::testing {
namespace {


Image Decode(const std::string& bytes, int channels) {
  return DecodeImage(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), channels);
}

// The decode error message, or "" when it decoded.
std::string DecodeError(const std::string& bytes, int channels = 3) {
  try {
    Decode(bytes, channels);
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "";
}

int MaxAbsDifference(const Image& a, const Image& b) {
  EXPECT_EQ(a.height, b.height);
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.channels, b.channels);
  if (a.pixels.size() != b.pixels.size()) return 256;
  int worst = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) worst = std::max(worst, std::abs(a.pixels[i] - b.pixels[i]));
  return worst;
}

// A horizontal gradient in red, a vertical one in green and a checkerboard in blue.
Image TestPattern(int height, int width, int channels) {
  Image image{height, width, channels, std::vector<uint8_t>(size_t{1} * height * width * channels)};
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < channels; ++c) {
        int value = c == 0   ? x * 255 / std::max(width - 1, 1)
                    : c == 1 ? y * 255 / std::max(height - 1, 1)
                             : ((x / 4 + y / 4) % 2) * 255;
        image.pixels[(size_t{1} * y * width + x) * channels + c] = static_cast<uint8_t>(value);
      }
  return image;
}

// Reference images and Pillow's results, written once by tests/image_reference.py.
class ImageReferenceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    directory_ = new TempDirectory();
    available_ = RunPythonReference("image_reference.py", *directory_);
    expected_ = ReadReferenceImages(*directory_);
  }
  static void TearDownTestSuite() {
    delete directory_;
    directory_ = nullptr;
    expected_.clear();
  }
  void SetUp() override {
    if (!available_) GTEST_SKIP() << kPython << " with PIL and numpy is needed for the reference images";
  }

  static std::string File(const std::string& name) { return ReadBytes(*directory_ / name); }
  static const Image& Expected(const std::string& name) {
    auto found = expected_.find(name);
    if (found == expected_.end()) throw std::runtime_error("no reference " + name);
    EXPECT_EQ(found->second.pixels.size(),
              size_t{1} * found->second.height * found->second.width * found->second.channels);
    return found->second;
  }

  static TempDirectory* directory_;
  static bool available_;
  static std::map<std::string, Image> expected_;
};

TempDirectory* ImageReferenceTest::directory_ = nullptr;
bool ImageReferenceTest::available_ = false;
std::map<std::string, Image> ImageReferenceTest::expected_;

TEST_F(ImageReferenceTest, PngDecodesToItsExactPixels) {
  struct Case {
    const char* file;
    int channels;
    const char* expected;
  };
  for (const Case& c : {Case{"rgb.png", 3, "rgb.png"}, Case{"rgba.png", 3, "rgba.png"},
                        Case{"gray.png", 1, "gray.png"}, Case{"gray.png", 3, "gray.png.rgb"},
                        Case{"rgb.png", 1, "rgb.png.gray"}, Case{"palette.png", 3, "palette.png"},
                        Case{"bilevel.png", 1, "bilevel.png"}, Case{"gray16.png", 1, "gray16.png"},
                        Case{"rgb16.png", 3, "rgb16.png"}, Case{"interlaced.png", 3, "interlaced.png"}}) {
    SCOPED_TRACE(std::string(c.file) + " as " + std::to_string(c.channels) + " channels");
    Image image = Decode(File(c.file), c.channels);
    EXPECT_EQ(image.height, 37);
    EXPECT_EQ(image.width, 53);
    EXPECT_EQ(image.channels, c.channels);
    EXPECT_EQ(MaxAbsDifference(image, Expected(c.expected)), 0);
  }
}

// Pillow and TurboJPEG run the same libjpeg-turbo with the same defaults (accurate integer DCT, smooth chroma
// upsampling), so the pixels agree exactly.
TEST_F(ImageReferenceTest, JpegDecodesLikePillow) {
  struct Case {
    const char* file;
    int channels;
    const char* expected;
  };
  for (const Case& c : {Case{"rgb.jpg", 3, "rgb.jpg"}, Case{"rgb.jpg", 1, "rgb.jpg.gray"},
                        Case{"progressive.jpg", 3, "progressive.jpg"}, Case{"444.jpg", 3, "444.jpg"},
                        Case{"gray.jpg", 1, "gray.jpg"}, Case{"cmyk.jpg", 3, "cmyk.jpg"}}) {
    SCOPED_TRACE(std::string(c.file) + " as " + std::to_string(c.channels) + " channels");
    Image image = Decode(File(c.file), c.channels);
    EXPECT_EQ(MaxAbsDifference(image, Expected(c.expected)), 0);
  }
  // Gray asked for in RGB repeats the one channel.
  Image gray = Decode(File("gray.jpg"), 3);
  const Image& expected = Expected("gray.jpg");
  ASSERT_EQ(gray.pixels.size(), expected.pixels.size() * 3);
  for (size_t i = 0; i < expected.pixels.size(); ++i)
    for (int c = 0; c < 3; ++c) ASSERT_EQ(gray.pixels[3 * i + c], expected.pixels[i]) << "pixel " << i;
}

TEST_F(ImageReferenceTest, ResizeMatchesPillowBilinear) {
  struct Case {
    const char* source;
    const char* expected;
  };
  for (const Case& c : {Case{"noise", "noise.shrink"}, Case{"noise", "noise.shrink_a_lot"},
                        Case{"noise", "noise.enlarge"}, Case{"noise", "noise.width_only"},
                        Case{"noise", "noise.height_only"}, Case{"noise_gray", "noise_gray.shrink"}}) {
    SCOPED_TRACE(c.expected);
    const Image& expected = Expected(c.expected);
    Image resized = Resize(Expected(c.source), expected.height, expected.width);
    EXPECT_EQ(MaxAbsDifference(resized, expected), 0);
  }
}

TEST(ImageTest, EmptyRandomAndForeignBytesAreRejected) {
  EXPECT_EQ(DecodeError(""), "empty image data (0 bytes)");
  EXPECT_EQ(DecodeError(std::string("GIF89a\x01\x00\x01\x00", 10)),
            "not a JPEG or PNG (starts with 47 49 46 38 39 61 01 00 ..)");
  EXPECT_EQ(DecodeError("\xff\xd8"), "not a JPEG or PNG (starts with ff d8)");
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    std::string noise(1 + trial * 37, '\0');
    for (char& byte : noise) byte = static_cast<char>(rng());
    if (noise[0] == '\xff' || noise[0] == '\x89') noise[0] = 'x';
    EXPECT_NE(DecodeError(noise).find("not a JPEG or PNG (starts with "), std::string::npos);
  }
  // The right magic followed by garbage.
  std::string jpeg_garbage = "\xff\xd8\xff" + std::string(200, '\x17');
  EXPECT_NE(DecodeError(jpeg_garbage).find("JPEG: "), std::string::npos) << DecodeError(jpeg_garbage);
  std::string png_garbage = std::string("\x89PNG\r\n\x1a\n", 8) + std::string(200, '\x17');
  EXPECT_NE(DecodeError(png_garbage).find("corrupt PNG: "), std::string::npos) << DecodeError(png_garbage);
  EXPECT_THROW(DecodeImage(reinterpret_cast<const uint8_t*>("x"), 1, 2), InvalidInput);
}

// Every way of cutting a JPEG short is an error, never an image with garbage where the data ran out.
TEST(ImageTest, TruncatedJpegIsRejected) {
  std::string jpeg = EncodeJpeg(TestPattern(64, 80, 3), 90);
  ASSERT_NO_THROW(Decode(jpeg, 3));
  for (size_t keep :
       {size_t{3}, size_t{20}, size_t{200}, jpeg.size() / 2, jpeg.size() - 100, jpeg.size() - 2}) {
    SCOPED_TRACE("first " + std::to_string(keep) + " of " + std::to_string(jpeg.size()) + " bytes");
    std::string message = DecodeError(jpeg.substr(0, keep));
    EXPECT_EQ(message.rfind("truncated JPEG: ", 0), 0u) << message;
  }
  EXPECT_EQ(DecodeError(jpeg.substr(0, jpeg.size() / 2)), "truncated JPEG: Premature end of JPEG file");
}

// Junk between segments only draws a warning from libjpeg and leaves the picture whole, so it is accepted;
// so are bytes after the end marker.
TEST(ImageTest, JpegWithExtraneousBytesDecodes) {
  std::string jpeg = EncodeJpeg(TestPattern(64, 80, 3), 90);
  Image clean = Decode(jpeg, 3);
  std::string padded = jpeg.substr(0, jpeg.size() - 2) + std::string(5, '\0') + "\xff\xd9";
  EXPECT_EQ(MaxAbsDifference(Decode(padded, 3), clean), 0);
  EXPECT_EQ(MaxAbsDifference(Decode(jpeg + "trailing", 3), clean), 0);
  // ... but not once the file is also cut short.
  EXPECT_EQ(DecodeError(padded.substr(0, padded.size() - 1)).rfind("truncated JPEG: ", 0), 0u);
}

// A flipped bit in the compressed data either breaks the Huffman decoding, which libjpeg reports as a warning
// and which must fail here, or goes unnoticed by any decoder.
TEST(ImageTest, CorruptJpegDataIsRejected) {
  std::string jpeg = EncodeJpeg(TestPattern(64, 80, 3), 90);
  int rejected = 0;
  for (int trial = 0; trial < 100; ++trial) {
    std::string damaged = jpeg;
    damaged[jpeg.size() / 3 + (trial * 13) % (jpeg.size() / 2)] ^= static_cast<char>(1 << (trial % 8));
    std::string message = DecodeError(damaged);
    if (message.empty()) continue;
    EXPECT_EQ(message.rfind("corrupt JPEG: ", 0), 0u) << message;
    ++rejected;
  }
  EXPECT_GT(rejected, 0);
}

TEST(ImageTest, TruncatedOrCorruptPngIsRejected) {
  std::string png = EncodePng(TestPattern(64, 80, 3));
  for (size_t keep : {size_t{8}, size_t{20}, size_t{40}, png.size() / 2, png.size() - 13, png.size() - 1}) {
    SCOPED_TRACE("first " + std::to_string(keep) + " of " + std::to_string(png.size()) + " bytes");
    EXPECT_EQ(DecodeError(png.substr(0, keep)),
              "truncated PNG: the data ends after " + std::to_string(keep) + " bytes");
  }
  std::string flipped = png;
  flipped[png.size() / 2] ^= 0x40;  // inside the image data: its CRC no longer matches
  EXPECT_EQ(DecodeError(flipped).rfind("corrupt PNG: ", 0), 0u) << DecodeError(flipped);
}

TEST(ImageTest, PngRoundTripIsExact) {
  for (int channels : {1, 3}) {
    Image image = TestPattern(29, 41, channels);
    Image decoded = Decode(EncodePng(image), channels);
    EXPECT_EQ(MaxAbsDifference(decoded, image), 0) << channels << " channels";
  }
}

TEST(ImageTest, JpegRoundTripIsClose) {
  // Smooth content survives JPEG at quality 95 within a few levels; the checkerboard's edges ring more, so
  // the blue channel is left a plain ramp here.
  Image image = TestPattern(48, 64, 3);
  for (size_t i = 2; i < image.pixels.size(); i += 3) image.pixels[i] = image.pixels[i - 2] / 2;
  Image decoded = Decode(EncodeJpeg(image, 95), 3);
  EXPECT_LE(MaxAbsDifference(decoded, image), 6);
  Image gray = TestPattern(48, 64, 1);
  EXPECT_LE(MaxAbsDifference(Decode(EncodeJpeg(gray, 95), 1), gray), 2);
  EXPECT_THROW(EncodeJpeg(image, 0), InvalidInput);
  EXPECT_THROW(EncodeJpeg(Image{2, 2, 3, {1, 2, 3}}, 90), InvalidInput);
}

TEST(ImageTest, ShortestSideSizes) {
  int height = 0, width = 0;
  ShortestSideSize(500, 375, 256, &height, &width);
  EXPECT_EQ(height, 341);  // 500 * 256 / 375 = 341.33, rounded down
  EXPECT_EQ(width, 256);
  ShortestSideSize(375, 500, 256, &height, &width);
  EXPECT_EQ(height, 256);
  EXPECT_EQ(width, 341);
  ShortestSideSize(100, 100, 224, &height, &width);
  EXPECT_EQ(height, 224);
  EXPECT_EQ(width, 224);
  Image resized = ResizeShortestSide(TestPattern(30, 90, 3), 10);
  EXPECT_EQ(resized.height, 10);
  EXPECT_EQ(resized.width, 30);
  EXPECT_EQ(resized.channels, 3);
  EXPECT_EQ(resized.pixels.size(), 10u * 30 * 3);
  EXPECT_THROW(ShortestSideSize(0, 5, 10, &height, &width), InvalidInput);
  EXPECT_THROW(ShortestSideSize(5, 5, 0, &height, &width), InvalidInput);
}

TEST(ImageTest, ResizeKeepsAConstantImageConstant) {
  for (auto [height, width] : {std::pair{1, 1}, std::pair{7, 3}, std::pair{64, 64}, std::pair{300, 200}}) {
    Image image{37, 23, 3, std::vector<uint8_t>(37 * 23 * 3)};
    for (size_t i = 0; i < image.pixels.size(); ++i)
      image.pixels[i] = static_cast<uint8_t>(60 + 70 * (i % 3));
    Image resized = Resize(image, height, width);
    ASSERT_EQ(resized.pixels.size(), size_t{1} * height * width * 3);
    for (size_t i = 0; i < resized.pixels.size(); ++i)
      ASSERT_EQ(resized.pixels[i], 60 + 70 * (i % 3)) << height << "x" << width << " byte " << i;
  }
}

TEST(ImageTest, ResizeKeepsAGradientMonotonic) {
  Image image = TestPattern(40, 120, 1);  // one channel: the horizontal ramp
  for (int width : {13, 77, 240}) {
    Image resized = Resize(image, 25, width);
    for (int y = 0; y < resized.height; ++y)
      for (int x = 1; x < resized.width; ++x)
        ASSERT_LE(resized.pixels[y * width + x - 1], resized.pixels[y * width + x])
            << "width " << width << " at " << y << "," << x;
    EXPECT_LT(resized.pixels[0], 20);  // the ends average at most 120 / 13 source pixels
    EXPECT_GT(resized.pixels[width - 1], 235);
  }
}

}  // namespace
}  // namespace lockstep::testing
