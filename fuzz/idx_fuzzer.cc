// Fuzzes the idx (MNIST, Fashion-MNIST) image + label file parser. The input is the image file's bytes, then
// the label file's; the last two bytes say how long the label file is.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "lockstep/core/enforce.h"
#include "lockstep/data/idx_dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  size -= 2;
  size_t labels_size = data[size] | size_t{data[size + 1]} << 8;
  if (labels_size > size) labels_size = size;
  std::vector<uint8_t> images(data, data + size - labels_size),
      labels(data + size - labels_size, data + size);
  try {
    lockstep::ImageDataset dataset = lockstep::ParseIdxDataset(images, "images", labels, "labels");
    if (static_cast<int64_t>(dataset.pixels.size()) != dataset.size() * dataset.image_bytes())
      __builtin_trap();
  } catch (const lockstep::InvalidInput&) {
  }
  return 0;
}
