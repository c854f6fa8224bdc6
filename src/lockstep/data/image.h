// 8-bit images in memory: JPEG (TurboJPEG) and PNG (libpng) decode and encode, and the antialiased bilinear
// resize that brings an image's shortest side to the training scale.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lockstep {

struct Image {
  int height = 0, width = 0, channels = 0;  // channels: 1 (gray) or 3 (colour)
  std::vector<uint8_t> pixels;              // (height, width, channels)
};

// The order of an image's three colour channels. Caffe and Caffe2 read images through OpenCV, so their raw
// records and the inputs of their networks are BGR; DecodeImage gives RGB. Gray images have no order.
enum class ColorOrder { kBgr, kRgb };
inline constexpr ColorOrder kDecodedColorOrder = ColorOrder::kRgb;

// "bgr" or "rgb"; anything else is InvalidInput listing those.
ColorOrder ParseColorOrder(const std::string& name);
const char* ColorOrderName(ColorOrder order);

// Swaps the first and third channel of every pixel of a colour image, turning RGB into BGR and back; gray
// images are left as they are.
void SwapRedAndBlue(Image* image);

// Decodes a JPEG or PNG, told apart by their magic bytes, into `channels` (1 or 3) channels, colour in RGB
// order (kDecodedColorOrder). Images over 2^28 pixels are refused.
// - JPEG: gray, YCbCr/RGB and (Adobe, inverted) CMYK/YCCK files; gray output of a colour JPEG is its luma.
//   A libjpeg warning (truncated or corrupt data) is an error, so a damaged file never yields pixels; the one
//   exception is "extraneous bytes before marker" in a file that ends with its EOI marker, which libjpeg
//   skips without touching the pixels.
// - PNG: any bit depth and colour type; palettes and low bit depths are expanded, 16-bit samples keep their
//   high byte, alpha (and tRNS transparency) is dropped, gray output of a colour PNG is Rec. 601 luma rounded
//   the way Pillow's convert("L") does.
// Throws InvalidInput with a one-line reason and no trailing period ("truncated JPEG: Premature end of JPEG
// file"), so callers can prefix where the bytes came from.
Image DecodeImage(const uint8_t* data, size_t size, int channels);

// quality in [1, 100]; colour images use 4:2:0 chroma subsampling, as Pillow and OpenCV do by default.
std::string EncodeJpeg(const Image& image, int quality = 95);
std::string EncodePng(const Image& image);

// Resampling is Pillow's BILINEAR: a triangle filter whose support widens with the shrink factor, so
// shrinking averages every source pixel (antialiased) and enlarging interpolates between the two nearest
// ones, with pixel centres at +0.5. It runs as two separable passes (horizontal, then vertical) in Pillow's
// fixed-point arithmetic, which makes the output bit-identical to PIL's Image.resize(size, Image.BILINEAR).
Image Resize(const Image& image, int height, int width);
// The same on raw pixels: pixels is (height, width, channels) with any channel count, out is
// (out_height, out_width, channels). `scratch` holds the intermediate of the two passes, so a caller that
// keeps it does not allocate per image once it has grown.
void ResizeInto(const uint8_t* pixels, int height, int width, int channels, int out_height, int out_width,
                uint8_t* out, std::vector<uint8_t>* scratch);

// The size with the shortest side equal to `size` and the other side scaled in proportion, rounded down (as
// Caffe2's ImageInputOp and torchvision's Resize do): 500x375 -> 341x256 for size 256.
void ShortestSideSize(int height, int width, int size, int* out_height, int* out_width);
Image ResizeShortestSide(const Image& image, int size);

}  // namespace lockstep
