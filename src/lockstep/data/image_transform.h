// The per-image training transform: shortest side resized to `scale`, a crop (random for training, centre for
// test), an optional random horizontal mirror, then per-channel (pixel - mean) / std into a float NCHW slice
// whose colour channels are in the chosen order.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "lockstep/data/image.h"

namespace lockstep {

struct ImageTransformOptions {
  int scale = 0;             // > 0: resize first so the shortest side is `scale` (see ResizeShortestSide)
  int crop = 0;              // the output is crop x crop
  bool random_crop = false;  // a uniformly random position (training); otherwise the centre, rounded down
  bool mirror = false;       // flip horizontally with probability 1/2
  std::vector<float> mean;   // one value per channel, or one for all; empty: 0
  std::vector<float> std;    // one value per channel, or one for all; empty: 1
  // The order of the output's colour channels, which is also the order of a per-channel mean and std. Input
  // pixels in the other order have their first and third channel swapped; 1-channel images have no order.
  ColorOrder color_order = ColorOrder::kBgr;
};

// Holds the buffers one image needs, so after the first images Apply does not allocate. Not thread-safe:
// one per decoding thread.
//
// Random draws, in this order and only for the options that are on: the crop's top row and left column
// (each uniform over the valid positions), then the mirror coin. Each draw takes one 32-bit output of the
// generator and maps it with a multiply-shift, so a seed gives the same crops with any standard library.
class ImageTransform {
 public:
  // Throws InvalidInput for a bad crop, mean or std.
  ImageTransform(int channels, ImageTransformOptions options);

  int channels() const { return channels_; }
  int crop() const { return options_.crop; }
  int64_t output_size() const { return int64_t{channels_} * options_.crop * options_.crop; }

  // out is (channels, crop, crop), colour in options.color_order; `order` is the colour order of the input.
  // rng may be null when neither random_crop nor mirror is on. Throws InvalidInput when the image has
  // another channel count or is smaller than the crop once resized.
  void Apply(const Image& image, ColorOrder order, std::mt19937* rng, float* out);
  // pixels is (height, width, channels), as Caffe2 stores raw images.
  void ApplyHwc(const uint8_t* pixels, int height, int width, ColorOrder order, std::mt19937* rng,
                float* out);
  // pixels is (channels, height, width), as Caffe's Datum stores raw images.
  void ApplyChw(const uint8_t* pixels, int height, int width, ColorOrder order, std::mt19937* rng,
                float* out);

 private:
  // Pixel (y, x, c) is at data[y * row_stride + x * column_stride + c * channel_stride].
  struct PixelView {
    const uint8_t* data;
    int height, width;
    int64_t row_stride, column_stride, channel_stride;
  };

  // Resizes an HWC image into resized_ when `scale` asks for it; returns the view to crop from.
  PixelView ResizedHwc(const uint8_t* pixels, int height, int width);
  // Output channel c reads input channel c, or channels - 1 - c when the input's colour order differs.
  void CropNormalize(const PixelView& view, int original_height, int original_width, ColorOrder order,
                     std::mt19937* rng, float* out) const;

  int channels_;
  ImageTransformOptions options_;
  std::vector<float> table_;  // (channels, 256): (v - mean[c]) / std[c] for every byte value v
  std::vector<uint8_t> resized_, hwc_, scratch_;
};

}  // namespace lockstep
