// idx file reading through zlib's gz* functions, which read plain files unchanged.
#include "lockstep/data/idx_dataset.h"

#include <zlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "lockstep/core/enforce.h"

namespace lockstep {

namespace {

constexpr int64_t kMaxSide = int64_t{1} << 15;

std::vector<uint8_t> ReadWholeFile(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (!file) {
    const char* folder = std::getenv("LOCKSTEP_FASHION_MNIST_DIR");
    throw IoError(
        fmt::format("cannot open {}: {}; {}", path, std::strerror(errno),
                    folder && *folder
                        ? fmt::format("LOCKSTEP_FASHION_MNIST_DIR is set to '{}'; point it at the folder of "
                                      "Fashion-MNIST's idx files, or unset it",
                                      folder)
                        : "for Fashion-MNIST install Debian's dataset-fashion-mnist"));
  }
  std::unique_ptr<gzFile_s, int (*)(gzFile)> closer(file, gzclose);
  std::vector<uint8_t> bytes;
  uint8_t buffer[1 << 16];
  int n;
  while ((n = gzread(file, buffer, sizeof(buffer))) > 0) bytes.insert(bytes.end(), buffer, buffer + n);
  if (n < 0) throw IoError(fmt::format("cannot read {}: corrupt gzip data", path));
  return bytes;
}

uint32_t BigEndian32(const std::vector<uint8_t>& bytes, size_t offset) {
  return uint32_t{bytes[offset]} << 24 | uint32_t{bytes[offset + 1]} << 16 |
         uint32_t{bytes[offset + 2]} << 8 | bytes[offset + 3];
}

}  // namespace

ImageDataset ReadIdxDataset(const std::string& images_path, const std::string& labels_path) {
  auto images = ReadWholeFile(images_path);  // first, so a missing dataset is named by its images file
  return ParseIdxDataset(images, images_path, ReadWholeFile(labels_path), labels_path);
}

ImageDataset ParseIdxDataset(const std::vector<uint8_t>& images, const std::string& images_name,
                             const std::vector<uint8_t>& labels, const std::string& labels_name) {
  if (images.size() < 16 || BigEndian32(images, 0) != 0x803)
    throw InvalidInput(fmt::format("{} is not an idx3 image file (bad magic number)", images_name));
  if (labels.size() < 8 || BigEndian32(labels, 0) != 0x801)
    throw InvalidInput(fmt::format("{} is not an idx1 label file (bad magic number)", labels_name));
  int64_t count = BigEndian32(images, 4);
  int64_t height = BigEndian32(images, 8), width = BigEndian32(images, 12);
  // The bound keeps count * height * width far from overflow whatever a corrupt header says.
  if (height < 1 || width < 1 || height > kMaxSide || width > kMaxSide)
    throw InvalidInput(fmt::format("{} holds images of height {} and width {}; each must be 1 to {}",
                                   images_name, height, width, kMaxSide));
  int64_t label_count = BigEndian32(labels, 4);
  if (count != label_count)
    throw InvalidInput(fmt::format("{} holds {} images but {} holds {} labels", images_name, count,
                                   labels_name, label_count));
  if (static_cast<int64_t>(images.size()) != 16 + count * height * width)
    throw InvalidInput(fmt::format("{} is truncated: expected {} bytes, found {}", images_name,
                                   16 + count * height * width, images.size()));
  if (static_cast<int64_t>(labels.size()) != 8 + count)
    throw InvalidInput(
        fmt::format("{} is truncated: expected {} bytes, found {}", labels_name, 8 + count, labels.size()));
  ImageDataset dataset;
  dataset.channels = 1;
  dataset.height = static_cast<int>(height);
  dataset.width = static_cast<int>(width);
  dataset.pixels.assign(images.begin() + 16, images.end());
  dataset.labels.assign(labels.begin() + 8, labels.end());
  return dataset;
}

std::string FashionMnistDir() {
  const char* dir = std::getenv("LOCKSTEP_FASHION_MNIST_DIR");
  return dir && *dir ? dir : "/usr/share/datasets/fashion-mnist";
}

ImageDataset LoadFashionMnist(bool train, const std::string& dir) {
  std::string prefix = dir + (train ? "/train" : "/t10k");
  return ReadIdxDataset(prefix + "-images-idx3-ubyte.gz", prefix + "-labels-idx1-ubyte.gz");
}

}  // namespace lockstep
