// Resize, crop, mirror and normalise one image into its slice of an NCHW float batch.
#include "lockstep/data/image_transform.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "lockstep/core/enforce.h"

namespace lockstep {
namespace {

// Uniform in [0, n) from one 32-bit draw: (draw * n) >> 32. Its bias is below n / 2^32, and unlike
// std::uniform_int_distribution the result does not depend on the standard library.
int UniformBelow(std::mt19937* rng, int n) {
  return static_cast<int>((static_cast<uint64_t>((*rng)()) * static_cast<uint64_t>(n)) >> 32);
}

// One value per channel from a list of one per channel or one for all.
float PerChannel(const std::vector<float>& values, int channel, float fallback) {
  if (values.empty()) return fallback;
  return values.size() == 1 ? values[0] : values[channel];
}

void CheckPerChannel(const std::vector<float>& values, int channels, const char* name) {
  if (!values.empty() && values.size() != 1 && values.size() != static_cast<size_t>(channels))
    throw InvalidInput(
        fmt::format("{} has {} values; give 1 or one per channel ({})", name, values.size(), channels));
  for (float value : values)
    if (!std::isfinite(value)) throw InvalidInput(fmt::format("{} value {} is not finite", name, value));
}

}  // namespace

ImageTransform::ImageTransform(int channels, ImageTransformOptions options)
    : channels_(channels), options_(std::move(options)) {
  if (channels_ <= 0) throw InvalidInput(fmt::format("images need at least 1 channel, not {}", channels_));
  if (options_.crop <= 0) throw InvalidInput(fmt::format("crop size {} is not positive", options_.crop));
  CheckPerChannel(options_.mean, channels_, "mean");
  CheckPerChannel(options_.std, channels_, "std");
  table_.resize(size_t{256} * channels_);
  for (int c = 0; c < channels_; ++c) {
    float mean = PerChannel(options_.mean, c, 0.0f);
    float std = PerChannel(options_.std, c, 1.0f);
    if (std == 0.0f) throw InvalidInput(fmt::format("std of channel {} is 0", c));
    for (int v = 0; v < 256; ++v) table_[c * 256 + v] = (static_cast<float>(v) - mean) / std;
  }
}

void ImageTransform::Apply(const Image& image, ColorOrder order, std::mt19937* rng, float* out) {
  if (image.pixels.size() != size_t{1} * image.height * image.width * image.channels)
    throw InvalidInput(fmt::format("image of {}x{}x{} has {} bytes of pixels", image.height, image.width,
                                   image.channels, image.pixels.size()));
  if (image.channels != channels_)
    throw InvalidInput(fmt::format("image has {} channels, expected {}", image.channels, channels_));
  ApplyHwc(image.pixels.data(), image.height, image.width, order, rng, out);
}

void ImageTransform::ApplyHwc(const uint8_t* pixels, int height, int width, ColorOrder order,
                              std::mt19937* rng, float* out) {
  if (height <= 0 || width <= 0) throw InvalidInput(fmt::format("image of {}x{} pixels", height, width));
  CropNormalize(ResizedHwc(pixels, height, width), height, width, order, rng, out);
}

void ImageTransform::ApplyChw(const uint8_t* pixels, int height, int width, ColorOrder order,
                              std::mt19937* rng, float* out) {
  if (height <= 0 || width <= 0) throw InvalidInput(fmt::format("image of {}x{} pixels", height, width));
  int64_t plane = int64_t{height} * width;
  if (options_.scale <= 0 || std::min(height, width) == options_.scale) {
    CropNormalize(PixelView{pixels, height, width, width, 1, plane}, height, width, order, rng, out);
    return;
  }
  // The resize works on interleaved pixels, so planar ones are interleaved first.
  hwc_.resize(plane * channels_);
  for (int c = 0; c < channels_; ++c)
    for (int64_t i = 0; i < plane; ++i) hwc_[i * channels_ + c] = pixels[c * plane + i];
  CropNormalize(ResizedHwc(hwc_.data(), height, width), height, width, order, rng, out);
}

ImageTransform::PixelView ImageTransform::ResizedHwc(const uint8_t* pixels, int height, int width) {
  if (options_.scale > 0 && std::min(height, width) != options_.scale) {
    int resized_height = 0, resized_width = 0;
    ShortestSideSize(height, width, options_.scale, &resized_height, &resized_width);
    resized_.resize(size_t{1} * resized_height * resized_width * channels_);
    ResizeInto(pixels, height, width, channels_, resized_height, resized_width, resized_.data(), &scratch_);
    pixels = resized_.data();
    height = resized_height;
    width = resized_width;
  }
  return PixelView{pixels, height, width, int64_t{width} * channels_, channels_, 1};
}

void ImageTransform::CropNormalize(const PixelView& view, int original_height, int original_width,
                                   ColorOrder order, std::mt19937* rng, float* out) const {
  const int crop = options_.crop;
  if (view.height < crop || view.width < crop) {
    std::string resized = view.height == original_height && view.width == original_width
                              ? ""
                              : fmt::format(" (resized from {}x{} to a shortest side of {})", original_height,
                                            original_width, options_.scale);
    throw InvalidInput(fmt::format("image of {}x{} pixels{} is smaller than the {}x{} crop", view.height,
                                   view.width, resized, crop, crop));
  }
  LOCKSTEP_ENFORCE(rng != nullptr || (!options_.random_crop && !options_.mirror),
                   "a random crop or mirror needs a random generator");
  int top = (view.height - crop) / 2, left = (view.width - crop) / 2;
  if (options_.random_crop) {
    top = UniformBelow(rng, view.height - crop + 1);
    left = UniformBelow(rng, view.width - crop + 1);
  }
  bool mirror = options_.mirror && UniformBelow(rng, 2) == 1;

  // out is (channels, crop, crop); with a mirror, output column x reads input column left + crop - 1 - x.
  int64_t step = mirror ? -view.column_stride : view.column_stride;
  int first_column = mirror ? left + crop - 1 : left;
  // The table is indexed by output channel: mean and std are in the output's colour order.
  bool swap = channels_ == 3 && order != options_.color_order;
  for (int c = 0; c < channels_; ++c) {
    const float* table = &table_[c * 256];
    int input_channel = swap ? channels_ - 1 - c : c;
    for (int y = 0; y < crop; ++y) {
      const uint8_t* source = view.data + (top + y) * view.row_stride + first_column * view.column_stride +
                              input_channel * view.channel_stride;
      float* target = out + (int64_t{c} * crop + y) * crop;
      for (int x = 0; x < crop; ++x, source += step) target[x] = table[*source];
    }
  }
}

}  // namespace lockstep
