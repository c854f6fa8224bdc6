// Image datasets held in memory as uint8 pixels + int32 labels, read from idx files (MNIST, Fashion-MNIST),
// gzip-compressed or not.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep {

struct ImageDataset {
  int channels = 0, height = 0, width = 0;
  std::vector<uint8_t> pixels;  // (size, channels, height, width)
  std::vector<int32_t> labels;  // (size)
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  int64_t image_bytes() const { return int64_t{channels} * height * width; }
};

// Reads an idx3 image file and its idx1 label file; checks magic numbers, sizes and that the counts agree.
ImageDataset ReadIdxDataset(const std::string& images_path, const std::string& labels_path);
// The same on the files' bytes (uncompressed); the names only name them in errors.
ImageDataset ParseIdxDataset(const std::vector<uint8_t>& images, const std::string& images_name,
                             const std::vector<uint8_t>& labels, const std::string& labels_name);

// From $LOCKSTEP_FASHION_MNIST_DIR when set, else Debian's dataset-fashion-mnist package
// (/usr/share/datasets/fashion-mnist).
std::string FashionMnistDir();
ImageDataset LoadFashionMnist(bool train, const std::string& dir = FashionMnistDir());

}  // namespace lockstep
