// The per-image transform: exact centre crops, per-channel normalisation, mirroring, reproducible random
// crops within bounds, NCHW output from HWC and CHW pixels, and the errors for images that cannot be cropped.
#include "lockstep/data/image_transform.h"

#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "lockstep/core/enforce.h"

namespace lockstep::testing {
namespace {

// pixel (y, x, c) = y * 40 + x * 5 + c: every value tells where it came from.
Image Positional(int height, int width, int channels) {
  Image image{height, width, channels, std::vector<uint8_t>(size_t{1} * height * width * channels)};
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < channels; ++c)
        image.pixels[(size_t{1} * y * width + x) * channels + c] = static_cast<uint8_t>(y * 40 + x * 5 + c);
  return image;
}

ImageTransformOptions Crop(int crop, int scale = 0) {
  ImageTransformOptions options;
  options.crop = crop;
  options.scale = scale;
  return options;
}

// The image is taken to be in the options' output order (BGR by default), so no channels are swapped.
std::vector<float> Transformed(ImageTransform* transform, const Image& image, std::mt19937* rng = nullptr) {
  std::vector<float> out(transform->output_size());
  transform->Apply(image, ColorOrder::kBgr, rng, out.data());
  return out;
}

TEST(ImageTransformTest, NchwLayoutByHand) {
  ImageTransform transform(3, Crop(2));
  Image image{2, 2, 3, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}};  // (y, x, c)
  EXPECT_EQ(Transformed(&transform, image), (std::vector<float>{1, 4, 7, 10, 2, 5, 8, 11, 3, 6, 9, 12}));
  // The same pixels stored (c, y, x).
  std::vector<uint8_t> chw = {1, 4, 7, 10, 2, 5, 8, 11, 3, 6, 9, 12};
  std::vector<float> out(12);
  transform.ApplyChw(chw.data(), 2, 2, ColorOrder::kBgr, nullptr, out.data());
  EXPECT_EQ(out, (std::vector<float>{1, 4, 7, 10, 2, 5, 8, 11, 3, 6, 9, 12}));
}

TEST(ImageTransformTest, CentreCropAndPerChannelNormalisation) {
  const std::vector<float> mean = {1.5f, 100.25f, 7.0f}, std = {2.0f, 0.3f, 57.0f};
  ImageTransformOptions options = Crop(3);
  options.mean = mean;
  options.std = std;
  ImageTransform transform(3, options);
  Image image = Positional(5, 8, 3);
  std::vector<float> out = Transformed(&transform, image);
  const int top = 1, left = 2;  // (5 - 3) / 2, (8 - 3) / 2 rounded down
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 3; ++y)
      for (int x = 0; x < 3; ++x) {
        float pixel = static_cast<float>((top + y) * 40 + (left + x) * 5 + c);
        EXPECT_EQ(out[(c * 3 + y) * 3 + x], (pixel - mean[c]) / std[c]) << c << "," << y << "," << x;
      }
  // One value applies to every channel.
  options.mean = {10.0f};
  options.std = {4.0f};
  ImageTransform shared(3, options);
  std::vector<float> shared_out = Transformed(&shared, image);
  EXPECT_EQ(shared_out[2 * 9 + 4], ((top + 1) * 40 + (left + 1) * 5 + 2 - 10.0f) / 4.0f);
}

// Input in the other colour order has red and blue swapped, from HWC and CHW pixels, with and without a
// resize; mean and std are in the output's order. Input in the output's order, and gray images, are as is.
TEST(ImageTransformTest, ColorOrderSwapsRedAndBlueBeforeNormalisation) {
  const std::vector<float> mean = {1.5f, 100.25f, 7.0f}, std = {2.0f, 0.3f, 57.0f};
  Image image = Positional(5, 8, 3);
  std::vector<uint8_t> chw(image.pixels.size());
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 5 * 8; ++i) chw[c * 40 + i] = image.pixels[i * 3 + c];
  for (int scale : {0, 6})
    for (ColorOrder output : {ColorOrder::kBgr, ColorOrder::kRgb}) {
      SCOPED_TRACE(std::string(ColorOrderName(output)) + " scale " + std::to_string(scale));
      ImageTransformOptions options = Crop(3, scale);
      options.mean = mean;
      options.std = std;
      options.color_order = output;
      ImageTransform transform(3, options);
      ImageTransformOptions plain_options = Crop(3, scale);
      ImageTransform plain(3, plain_options);  // no normalisation, no swap: the input's channels as they are
      std::vector<float> pixels(transform.output_size());
      plain.ApplyHwc(image.pixels.data(), 5, 8, ColorOrder::kBgr, nullptr, pixels.data());
      for (ColorOrder input : {ColorOrder::kBgr, ColorOrder::kRgb}) {
        std::vector<float> from_hwc(transform.output_size()), from_chw(transform.output_size());
        transform.Apply(image, input, nullptr, from_hwc.data());
        transform.ApplyChw(chw.data(), 5, 8, input, nullptr, from_chw.data());
        EXPECT_EQ(from_chw, from_hwc);
        for (int c = 0; c < 3; ++c) {
          int source = input == output ? c : 2 - c;
          for (int i = 0; i < 9; ++i)
            EXPECT_EQ(from_hwc[c * 9 + i], (pixels[source * 9 + i] - mean[c]) / std[c]) << c << " " << i;
        }
      }
    }
  ImageTransformOptions options = Crop(3);
  options.color_order = ColorOrder::kRgb;
  ImageTransform gray(1, options);
  Image gray_image = Positional(5, 8, 1);
  std::vector<float> as_bgr(gray.output_size()), as_rgb(gray.output_size());
  gray.Apply(gray_image, ColorOrder::kBgr, nullptr, as_bgr.data());
  gray.Apply(gray_image, ColorOrder::kRgb, nullptr, as_rgb.data());
  EXPECT_EQ(as_bgr, as_rgb);
}

TEST(ImageTransformTest, ColorOrderNames) {
  EXPECT_EQ(ParseColorOrder("bgr"), ColorOrder::kBgr);
  EXPECT_EQ(ParseColorOrder("rgb"), ColorOrder::kRgb);
  EXPECT_STREQ(ColorOrderName(ColorOrder::kRgb), "rgb");
  try {
    ParseColorOrder("BGR");
    ADD_FAILURE() << "parsed BGR";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "unknown color order 'BGR'; known orders: bgr, rgb");
  }
}

// Decides the mirror coin the way the transform documents it: one 32-bit draw mapped to [0, 2).
bool MirrorDraw(std::mt19937 rng) { return (static_cast<uint64_t>(rng()) * 2) >> 32; }

TEST(ImageTransformTest, MirrorFlipsHalfTheImages) {
  ImageTransform plain(1, Crop(4));
  ImageTransformOptions options = Crop(4);
  options.mirror = true;
  ImageTransform mirrored(1, options);
  Image image = Positional(4, 6, 1);
  std::vector<float> unflipped = Transformed(&plain, image);
  int flips = 0;
  for (unsigned seed = 0; seed < 200; ++seed) {
    std::mt19937 rng(seed);
    bool expect_flip = MirrorDraw(rng);
    std::vector<float> out = Transformed(&mirrored, image, &rng);
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 4; ++x)
        ASSERT_EQ(out[y * 4 + x], unflipped[y * 4 + (expect_flip ? 3 - x : x)]) << "seed " << seed;
    flips += expect_flip;
  }
  EXPECT_GT(flips, 70);
  EXPECT_LT(flips, 130);
}

// Two channels holding y and x show where each crop was taken.
TEST(ImageTransformTest, RandomCropIsReproducibleAndWithinBounds) {
  const int height = 9, width = 12, crop = 6;
  std::vector<uint8_t> hwc(height * width * 2);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      hwc[(y * width + x) * 2] = static_cast<uint8_t>(y);
      hwc[(y * width + x) * 2 + 1] = static_cast<uint8_t>(x);
    }
  ImageTransformOptions options = Crop(crop);
  options.random_crop = true;
  ImageTransform transform(2, options);
  std::set<std::pair<int, int>> corners;
  std::vector<float> out(transform.output_size()), again(transform.output_size());
  for (unsigned seed = 0; seed < 300; ++seed) {
    std::mt19937 rng(seed), same(seed);
    transform.ApplyHwc(hwc.data(), height, width, ColorOrder::kBgr, &rng, out.data());
    transform.ApplyHwc(hwc.data(), height, width, ColorOrder::kBgr, &same, again.data());
    ASSERT_EQ(out, again) << "seed " << seed;
    int top = static_cast<int>(out[0]), left = static_cast<int>(out[crop * crop]);
    ASSERT_GE(top, 0);
    ASSERT_LE(top, height - crop);
    ASSERT_GE(left, 0);
    ASSERT_LE(left, width - crop);
    for (int y = 0; y < crop; ++y)
      for (int x = 0; x < crop; ++x) {
        ASSERT_EQ(out[y * crop + x], top + y);
        ASSERT_EQ(out[crop * crop + y * crop + x], left + x);
      }
    corners.insert({top, left});
  }
  EXPECT_EQ(corners.size(), size_t{(height - crop + 1) * (width - crop + 1)});  // every position is reached
  // A fresh generator with the same seed gives the same sequence of crops.
  std::mt19937 first(42), second(42);
  std::vector<float> a(transform.output_size()), b(transform.output_size());
  for (int i = 0; i < 5; ++i) {
    transform.ApplyHwc(hwc.data(), height, width, ColorOrder::kBgr, &first, a.data());
    transform.ApplyHwc(hwc.data(), height, width, ColorOrder::kBgr, &second, b.data());
    EXPECT_EQ(a, b);
  }
}

TEST(ImageTransformTest, ResizesTheShortestSideFirst) {
  Image image = Positional(6, 6, 3);
  for (int y = 0; y < 6; ++y)  // make it 12 wide so the resize changes both sides in proportion
    for (int x = 0; x < 6; ++x) image.pixels[(y * 6 + x) * 3] = static_cast<uint8_t>(200 - y * 30);
  Image wide = Resize(image, 6, 12);
  ImageTransform transform(3, Crop(3, 4));
  std::vector<float> out = Transformed(&transform, wide);

  Image resized = ResizeShortestSide(wide, 4);
  ASSERT_EQ(resized.height, 4);
  ASSERT_EQ(resized.width, 8);
  ImageTransform crop_only(3, Crop(3));
  EXPECT_EQ(out, Transformed(&crop_only, resized));

  // The same from planar pixels.
  std::vector<uint8_t> chw(wide.pixels.size());
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 6 * 12; ++i) chw[c * 72 + i] = wide.pixels[i * 3 + c];
  std::vector<float> from_chw(transform.output_size());
  transform.ApplyChw(chw.data(), 6, 12, ColorOrder::kBgr, nullptr, from_chw.data());
  EXPECT_EQ(from_chw, out);
}

TEST(ImageTransformTest, ErrorsNameTheProblem) {
  ImageTransform transform(3, Crop(10, 8));
  std::vector<float> out(transform.output_size());
  try {
    transform.Apply(Positional(20, 30, 3), ColorOrder::kBgr, nullptr, out.data());
    FAIL() << "a 10x10 crop of an image resized to 8x12 succeeded";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(
        e.what(),
        "image of 8x12 pixels (resized from 20x30 to a shortest side of 8) is smaller than the 10x10 crop");
  }
  ImageTransform no_resize(1, Crop(10));
  try {
    no_resize.Apply(Positional(9, 30, 1), ColorOrder::kBgr, nullptr, out.data());
    FAIL() << "a 10x10 crop of a 9x30 image succeeded";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "image of 9x30 pixels is smaller than the 10x10 crop");
  }
  EXPECT_THROW(transform.Apply(Positional(20, 30, 1), ColorOrder::kBgr, nullptr, out.data()),
               InvalidInput);  // channels
  EXPECT_THROW(ImageTransform(3, Crop(0)), InvalidInput);
  ImageTransformOptions two_means = Crop(4);
  two_means.mean = {1, 2};
  EXPECT_THROW(ImageTransform(3, two_means), InvalidInput);
  ImageTransformOptions zero_std = Crop(4);
  zero_std.std = {1, 0, 1};
  EXPECT_THROW(ImageTransform(3, zero_std), InvalidInput);
}

}  // namespace
}  // namespace lockstep::testing
