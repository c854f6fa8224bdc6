// JPEG and PNG decode/encode through TurboJPEG and libpng, and Pillow's antialiased bilinear resize.
#include "lockstep/data/image.h"

#include <fmt/format.h>
#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>

#include "lockstep/core/enforce.h"

namespace lockstep {
namespace {

// Larger images are refused before any allocation, so a corrupt header cannot ask for gigabytes.
constexpr int64_t kMaxPixels = int64_t{1} << 28;

void CheckDecodedSize(const char* format, int64_t height, int64_t width) {
  if (height <= 0 || width <= 0) throw InvalidInput(fmt::format("{} of {}x{} pixels", format, height, width));
  if (height * width > kMaxPixels)
    throw InvalidInput(fmt::format("{} of {}x{} pixels is larger than the limit of {} pixels", format, height,
                                   width, kMaxPixels));
}

void CheckChannels(int channels) {
  if (channels != 1 && channels != 3)
    throw InvalidInput(fmt::format("images decode to 1 or 3 channels, not {}", channels));
}

void CheckImage(const Image& image, const char* what) {
  if (image.height <= 0 || image.width <= 0 || (image.channels != 1 && image.channels != 3))
    throw InvalidInput(fmt::format("cannot {} an image of {}x{} pixels and {} channels", what, image.height,
                                   image.width, image.channels));
  if (image.pixels.size() != size_t{1} * image.height * image.width * image.channels)
    throw InvalidInput(fmt::format("image of {}x{}x{} has {} bytes of pixels", image.height, image.width,
                                   image.channels, image.pixels.size()));
}

// Rec. 601 luma in Pillow's fixed point (its convert("L")), so gray PNGs match what Python tools produce.
uint8_t Luma(const uint8_t* rgb) {
  return static_cast<uint8_t>((rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 0x8000) >> 16);
}

void RgbToGray(const uint8_t* rgb, int64_t pixels, uint8_t* gray) {
  for (int64_t i = 0; i < pixels; ++i) gray[i] = Luma(rgb + 3 * i);
}

// round(a * b / 255) without a division.
uint8_t MulDiv255(int a, int b) {
  int t = a * b + 128;
  return static_cast<uint8_t>(((t >> 8) + t) >> 8);
}

bool StartsWith(const uint8_t* data, size_t size, const uint8_t* magic, size_t magic_size) {
  return size >= magic_size && std::memcmp(data, magic, magic_size) == 0;
}

const uint8_t kJpegMagic[] = {0xFF, 0xD8, 0xFF};
const uint8_t kPngMagic[] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};

// ---- JPEG ----

struct TurboJpegDeleter {
  void operator()(void* handle) const { tjDestroy(handle); }
};
using TurboJpegHandle = std::unique_ptr<void, TurboJpegDeleter>;

// One decompressor per thread: a handle is not thread-safe, and making one per image costs allocations.
// TurboJPEG 2.1 can leave a handle mid-stream after an error, so a failed decode drops it for a fresh one.
TurboJpegHandle& DecompressorSlot() {
  thread_local TurboJpegHandle handle;
  return handle;
}

tjhandle Decompressor() {
  TurboJpegHandle& handle = DecompressorSlot();
  if (!handle) handle.reset(tjInitDecompress());
  if (!handle)
    throw IoError(std::string("cannot start a TurboJPEG decompressor: ") + tjGetErrorStr2(nullptr));
  return handle.get();
}

tjhandle Compressor() {
  thread_local TurboJpegHandle handle(tjInitCompress());
  if (!handle) throw IoError(std::string("cannot start a TurboJPEG compressor: ") + tjGetErrorStr2(nullptr));
  return handle.get();
}

// A complete JPEG ends with its EOI marker (FF D9); a file cut short does not.
bool EndsWithEoi(const uint8_t* data, size_t size) {
  return size >= 2 && data[size - 2] == 0xFF && data[size - 1] == 0xD9;
}

[[noreturn]] void ThrowJpegError(tjhandle handle, const uint8_t* data, size_t size) {
  std::string message = tjGetErrorStr2(handle);
  // libjpeg says "Premature end of JPEG file" when the data runs out, but a header cut short fails on a
  // later error, so a missing end marker also counts as truncation.
  bool truncated = message.find("Premature end") != std::string::npos || !EndsWithEoi(data, size);
  DecompressorSlot().reset();
  throw InvalidInput((truncated ? "truncated JPEG: " : "corrupt JPEG: ") + message);
}

Image DecodeJpeg(const uint8_t* data, size_t size, int channels) {
  tjhandle handle = Decompressor();
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle, data, static_cast<unsigned long>(size), &width, &height, &subsampling,
                          &colorspace) != 0)
    ThrowJpegError(handle, data, size);
  if (width <= 0 || height <= 0) {
    // TurboJPEG reads a stream that stops before its frame header as a "tables-only" JPEG with no image.
    DecompressorSlot().reset();
    throw InvalidInput(
        EndsWithEoi(data, size)
            ? std::string("corrupt JPEG: it holds tables but no image")
            : fmt::format("truncated JPEG: the data ends after {} bytes, inside the header", size));
  }
  CheckDecodedSize("JPEG", height, width);

  // libjpeg-turbo 2.1 cannot turn CMYK into RGB, so such files are decoded as CMYK and converted here.
  bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  int pixel_format = cmyk ? TJPF_CMYK : channels == 3 ? TJPF_RGB : TJPF_GRAY;
  int64_t pixels = int64_t{height} * width;
  Image image{height, width, channels, std::vector<uint8_t>(pixels * channels)};
  std::vector<uint8_t> decoded(cmyk ? pixels * 4 : 0);
  uint8_t* target = cmyk ? decoded.data() : image.pixels.data();
  if (tjDecompress2(handle, data, static_cast<unsigned long>(size), target, width, 0, height, pixel_format,
                    0) != 0) {
    // A warning still leaves pixels behind, usually garbage past the point where the data ran out. Extraneous
    // bytes between segments are the one warning that leaves the picture whole, as long as the file is
    // complete.
    bool harmless = tjGetErrorCode(handle) == TJERR_WARNING &&
                    std::strstr(tjGetErrorStr2(handle), "extraneous bytes before marker") != nullptr &&
                    EndsWithEoi(data, size);
    if (!harmless) ThrowJpegError(handle, data, size);
  }
  if (cmyk) {
    // Adobe CMYK JPEGs (what Photoshop and Pillow write) store inverted inks: R = (255 - C) * (255 - K) / 255
    // in ink terms is stored C times stored K over 255.
    std::vector<uint8_t> rgb(channels == 3 ? 0 : pixels * 3);
    uint8_t* out = channels == 3 ? image.pixels.data() : rgb.data();
    for (int64_t i = 0; i < pixels; ++i) {
      const uint8_t* p = &decoded[4 * i];
      for (int c = 0; c < 3; ++c) out[3 * i + c] = MulDiv255(p[c], p[3]);
    }
    if (channels == 1) RgbToGray(rgb.data(), pixels, image.pixels.data());
  }
  return image;
}

// ---- PNG ----

// libpng reports errors by longjmp, so everything it may jump over is plain data kept outside the jumping
// function, and C++ objects are only touched through pointers.
struct PngState {
  const uint8_t* data = nullptr;
  size_t size = 0, offset = 0;
  bool truncated = false;
  char message[256] = {};
  std::string* output = nullptr;  // encoding
};

void PngError(png_structp png, png_const_charp message) {
  auto* state = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(state->message, sizeof(state->message), "%s", message);
  png_longjmp(png, 1);
}

// Warnings (an unknown chunk, a bad ancillary CRC, a questionable colour profile) leave the pixels intact.
void PngWarning(png_structp, png_const_charp) {}

void PngRead(png_structp png, png_bytep out, size_t length) {
  auto* state = static_cast<PngState*>(png_get_io_ptr(png));
  if (length > state->size - state->offset) {
    state->truncated = true;
    png_error(png, "the data ends early");
  }
  std::memcpy(out, state->data + state->offset, length);
  state->offset += length;
}

struct PngReadStruct {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngReadStruct() { png_destroy_read_struct(&png, &info, nullptr); }
};

// Reads the whole image into `decoded` (resized here), returning false on a libpng error. Only the output
// buffers are C++ objects, reached through pointers.
bool ReadPng(PngReadStruct* read, int channels, Image* image, std::vector<uint8_t>* decoded,
             std::vector<png_bytep>* rows) {
  png_structp png = read->png;
  png_infop info = read->info;
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, color_type = 0;
  png_get_IHDR(png, info, &width, &height, &bit_depth, &color_type, nullptr, nullptr, nullptr);
  CheckDecodedSize("PNG", height, width);

  // 16-bit samples keep their high byte, as OpenCV's imread and Pillow do.
  if (bit_depth == 16) png_set_strip_16(png);
  // Palette -> RGB, 1/2/4-bit gray -> 8-bit, tRNS -> alpha, which the next line drops with any alpha.
  png_set_expand(png);
  png_set_strip_alpha(png);
  bool color = (color_type & PNG_COLOR_MASK_COLOR) != 0;
  if (!color && channels == 3) png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);

  int decoded_channels = png_get_channels(png, info);
  size_t row_bytes = png_get_rowbytes(png, info);
  if (row_bytes != size_t{width} * decoded_channels || (decoded_channels != 1 && decoded_channels != 3))
    png_error(png, "unexpected layout after expansion");
  image->height = static_cast<int>(height);
  image->width = static_cast<int>(width);
  image->channels = channels;
  decoded->resize(row_bytes * height);
  rows->resize(height);
  for (png_uint_32 y = 0; y < height; ++y) (*rows)[y] = decoded->data() + y * row_bytes;
  png_read_image(png, rows->data());
  png_read_end(png, nullptr);
  return true;
}

Image DecodePng(const uint8_t* data, size_t size, int channels) {
  PngState state;
  state.data = data;
  state.size = size;
  PngReadStruct read;
  read.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &state, PngError, PngWarning);
  if (read.png) read.info = png_create_info_struct(read.png);
  if (!read.png || !read.info) throw IoError("cannot start a libpng reader");
  png_set_read_fn(read.png, &state, PngRead);

  Image image;
  std::vector<uint8_t> decoded;
  std::vector<png_bytep> rows;
  if (!ReadPng(&read, channels, &image, &decoded, &rows))
    throw InvalidInput(state.truncated ? fmt::format("truncated PNG: the data ends after {} bytes", size)
                                       : fmt::format("corrupt PNG: {}", state.message));
  int64_t pixels = int64_t{image.height} * image.width;
  if (static_cast<int64_t>(decoded.size()) == pixels * channels) {
    image.pixels = std::move(decoded);
  } else {  // a colour PNG asked for in gray
    image.pixels.resize(pixels);
    RgbToGray(decoded.data(), pixels, image.pixels.data());
  }
  return image;
}

void PngWrite(png_structp png, png_bytep data, size_t length) {
  auto* state = static_cast<PngState*>(png_get_io_ptr(png));
  state->output->append(reinterpret_cast<const char*>(data), length);
}

void PngFlush(png_structp) {}

struct PngWriteStruct {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngWriteStruct() { png_destroy_write_struct(&png, &info); }
};

bool WritePng(PngWriteStruct* write, const Image& image, std::vector<png_bytep>* rows) {
  png_structp png = write->png;
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_IHDR(png, write->info, image.width, image.height, 8,
               image.channels == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, write->info);
  png_write_image(png, rows->data());
  png_write_end(png, nullptr);
  return true;
}

// ---- Resize ----

// Pillow's fixed point: 22 fractional bits leave room for 8-bit samples and a sign in an int32 sum.
constexpr int kPrecisionBits = 32 - 8 - 2;

// For each output position, the first input index, the number of taps and their fixed-point weights
// (`taps` slots per output).
struct ResampleWeights {
  int taps = 0;
  std::vector<int> first, count;
  std::vector<int32_t> weights;
};

// Pillow's precompute_coeffs with the bilinear (triangle) filter of support 1, stretched by the shrink factor
// when shrinking so every input pixel contributes.
ResampleWeights ComputeWeights(int in_size, int out_size) {
  double scale = static_cast<double>(in_size) / out_size;
  double filter_scale = std::max(scale, 1.0);
  double support = filter_scale;
  ResampleWeights result;
  result.taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  result.first.resize(out_size);
  result.count.resize(out_size);
  result.weights.assign(size_t{1} * out_size * result.taps, 0);
  std::vector<double> w(result.taps);
  double inverse_filter_scale = 1.0 / filter_scale;  // multiplied, not divided, to round as Pillow does
  for (int o = 0; o < out_size; ++o) {
    double center = (o + 0.5) * scale;
    int first = std::max(static_cast<int>(center - support + 0.5), 0);
    int count = std::min(static_cast<int>(center + support + 0.5), in_size) - first;
    double total = 0;
    for (int k = 0; k < count; ++k) {
      double distance = std::abs((k + first - center + 0.5) * inverse_filter_scale);
      w[k] = distance < 1.0 ? 1.0 - distance : 0.0;
      total += w[k];
    }
    int32_t* fixed = &result.weights[size_t{1} * o * result.taps];
    for (int k = 0; k < count; ++k) {
      double normalized = total != 0.0 ? w[k] / total : w[k];
      fixed[k] = static_cast<int32_t>(normalized < 0 ? -0.5 + normalized * (1 << kPrecisionBits)
                                                     : 0.5 + normalized * (1 << kPrecisionBits));
    }
    result.first[o] = first;
    result.count[o] = count;
  }
  return result;
}

uint8_t Clip8(int32_t value) {
  if (value >= (1 << kPrecisionBits << 8)) return 255;
  if (value <= 0) return 0;
  return static_cast<uint8_t>(value >> kPrecisionBits);
}

// in is (rows, in_width, channels); out is (rows, out_width, channels). kChannels > 0 fixes the channel count
// at compile time so the per-channel sums stay in registers; 0 takes it from `channels`.
template <int kChannels>
void ResampleRows(const uint8_t* in, int rows, int in_width, int channels, int out_width, uint8_t* out) {
  if (kChannels > 0) channels = kChannels;
  ResampleWeights weights = ComputeWeights(in_width, out_width);
  int32_t sums[kChannels > 0 ? kChannels : 1];
  for (int y = 0; y < rows; ++y) {
    const uint8_t* in_row = in + size_t{1} * y * in_width * channels;
    uint8_t* out_row = out + size_t{1} * y * out_width * channels;
    for (int x = 0; x < out_width; ++x) {
      const int32_t* w = &weights.weights[size_t{1} * x * weights.taps];
      const uint8_t* source = in_row + size_t{1} * weights.first[x] * channels;
      const int count = weights.count[x];
      if (kChannels > 0) {
        for (int c = 0; c < kChannels; ++c) sums[c] = 1 << (kPrecisionBits - 1);
        for (int k = 0; k < count; ++k) {
          const int32_t weight = w[k];
          const uint8_t* pixel = source + k * kChannels;
          for (int c = 0; c < kChannels; ++c) sums[c] += pixel[c] * weight;
        }
        for (int c = 0; c < kChannels; ++c) out_row[x * kChannels + c] = Clip8(sums[c]);
      } else {
        for (int c = 0; c < channels; ++c) {
          int32_t sum = 1 << (kPrecisionBits - 1);
          for (int k = 0; k < count; ++k) sum += source[k * channels + c] * w[k];
          out_row[x * channels + c] = Clip8(sum);
        }
      }
    }
  }
}

void ResampleRows(const uint8_t* in, int rows, int in_width, int channels, int out_width, uint8_t* out) {
  if (channels == 3) return ResampleRows<3>(in, rows, in_width, channels, out_width, out);
  if (channels == 1) return ResampleRows<1>(in, rows, in_width, channels, out_width, out);
  ResampleRows<0>(in, rows, in_width, channels, out_width, out);
}

// in is (in_height, row_length); out is (out_height, row_length). Each output row accumulates whole input
// rows, so the inner loop runs along memory and vectorises.
void ResampleColumns(const uint8_t* in, int in_height, size_t row_length, int out_height, uint8_t* out) {
  ResampleWeights weights = ComputeWeights(in_height, out_height);
  std::vector<int32_t> sums(row_length);
  for (int y = 0; y < out_height; ++y) {
    const int32_t* w = &weights.weights[size_t{1} * y * weights.taps];
    const uint8_t* source = in + weights.first[y] * row_length;
    std::fill(sums.begin(), sums.end(), 1 << (kPrecisionBits - 1));
    for (int k = 0; k < weights.count[y]; ++k) {
      const uint8_t* row = source + k * row_length;
      const int32_t weight = w[k];
      for (size_t i = 0; i < row_length; ++i) sums[i] += row[i] * weight;
    }
    uint8_t* out_row = out + y * row_length;
    for (size_t i = 0; i < row_length; ++i) out_row[i] = Clip8(sums[i]);
  }
}

}  // namespace

ColorOrder ParseColorOrder(const std::string& name) {
  if (name == "bgr") return ColorOrder::kBgr;
  if (name == "rgb") return ColorOrder::kRgb;
  throw InvalidInput(fmt::format("unknown color order '{}'; known orders: bgr, rgb", name));
}

const char* ColorOrderName(ColorOrder order) { return order == ColorOrder::kBgr ? "bgr" : "rgb"; }

void SwapRedAndBlue(Image* image) {
  if (image->channels != 3) return;
  for (size_t i = 0; i + 2 < image->pixels.size(); i += 3) std::swap(image->pixels[i], image->pixels[i + 2]);
}

Image DecodeImage(const uint8_t* data, size_t size, int channels) {
  CheckChannels(channels);
  if (size == 0) throw InvalidInput("empty image data (0 bytes)");
  if (StartsWith(data, size, kJpegMagic, sizeof(kJpegMagic))) return DecodeJpeg(data, size, channels);
  if (StartsWith(data, size, kPngMagic, sizeof(kPngMagic))) return DecodePng(data, size, channels);
  std::string start;
  for (size_t i = 0; i < std::min<size_t>(size, 8); ++i)
    start += fmt::format("{}{:02x}", i ? " " : "", data[i]);
  throw InvalidInput(fmt::format("not a JPEG or PNG (starts with {}{})", start, size > 8 ? " .." : ""));
}

std::string EncodeJpeg(const Image& image, int quality) {
  CheckImage(image, "encode");
  if (quality < 1 || quality > 100)
    throw InvalidInput(fmt::format("JPEG quality {} is not in [1, 100]", quality));
  tjhandle handle = Compressor();
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  int rc = tjCompress2(handle, image.pixels.data(), image.width, 0, image.height,
                       image.channels == 3 ? TJPF_RGB : TJPF_GRAY, &buffer, &size,
                       image.channels == 3 ? TJSAMP_420 : TJSAMP_GRAY, quality, 0);
  std::unique_ptr<unsigned char, void (*)(unsigned char*)> owned(buffer, tjFree);
  if (rc != 0) throw IoError(std::string("JPEG encoding failed: ") + tjGetErrorStr2(handle));
  return std::string(reinterpret_cast<const char*>(buffer), size);
}

std::string EncodePng(const Image& image) {
  CheckImage(image, "encode");
  std::string output;
  PngState state;
  state.output = &output;
  PngWriteStruct write;
  write.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &state, PngError, PngWarning);
  if (write.png) write.info = png_create_info_struct(write.png);
  if (!write.png || !write.info) throw IoError("cannot start a libpng writer");
  png_set_write_fn(write.png, &state, PngWrite, PngFlush);
  std::vector<png_bytep> rows(image.height);
  size_t row_bytes = size_t{1} * image.width * image.channels;
  for (int y = 0; y < image.height; ++y)
    rows[y] = const_cast<png_bytep>(image.pixels.data() + y * row_bytes);  // libpng does not write through it
  if (!WritePng(&write, image, &rows)) throw IoError(std::string("PNG encoding failed: ") + state.message);
  return output;
}

void ResizeInto(const uint8_t* pixels, int height, int width, int channels, int out_height, int out_width,
                uint8_t* out, std::vector<uint8_t>* scratch) {
  LOCKSTEP_ENFORCE(height > 0 && width > 0 && channels > 0 && out_height > 0 && out_width > 0,
                   "cannot resize {}x{}x{} to {}x{}", height, width, channels, out_height, out_width);
  size_t out_row = size_t{1} * out_width * channels;
  if (width == out_width && height == out_height) {
    std::memcpy(out, pixels, out_row * out_height);
  } else if (width == out_width) {
    ResampleColumns(pixels, height, out_row, out_height, out);
  } else if (height == out_height) {
    ResampleRows(pixels, height, width, channels, out_width, out);
  } else {
    scratch->resize(out_row * height);
    ResampleRows(pixels, height, width, channels, out_width, scratch->data());
    ResampleColumns(scratch->data(), height, out_row, out_height, out);
  }
}

Image Resize(const Image& image, int height, int width) {
  CheckImage(image, "resize");
  if (height <= 0 || width <= 0)
    throw InvalidInput(fmt::format("cannot resize to {}x{} pixels", height, width));
  Image out{height, width, image.channels, std::vector<uint8_t>(size_t{1} * height * width * image.channels)};
  std::vector<uint8_t> scratch;
  ResizeInto(image.pixels.data(), image.height, image.width, image.channels, height, width, out.pixels.data(),
             &scratch);
  return out;
}

void ShortestSideSize(int height, int width, int size, int* out_height, int* out_width) {
  if (height <= 0 || width <= 0 || size <= 0)
    throw InvalidInput(
        fmt::format("cannot resize {}x{} pixels to a shortest side of {}", height, width, size));
  int64_t shortest = std::min(height, width), longest = std::max(height, width);
  int64_t scaled = longest * size / shortest;
  if (scaled * size > kMaxPixels)
    throw InvalidInput(fmt::format("resizing {}x{} pixels to a shortest side of {} makes more than {} pixels",
                                   height, width, size, kMaxPixels));
  *out_height = static_cast<int>(height <= width ? size : scaled);
  *out_width = static_cast<int>(height <= width ? scaled : size);
}

Image ResizeShortestSide(const Image& image, int size) {
  int height = 0, width = 0;
  ShortestSideSize(image.height, image.width, size, &height, &width);
  return Resize(image, height, width);
}

}  // namespace lockstep
