// Fuzzes JPEG decoding (TurboJPEG plus lockstep's size checks, error mapping and CMYK conversion).
#include <cstddef>
#include <cstdint>

#include "lockstep/core/enforce.h"
#include "lockstep/data/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // DecodeImage picks the decoder by magic bytes; PNG has a fuzzer of its own.
  if (size < 3 || data[0] != 0xFF || data[1] != 0xD8 || data[2] != 0xFF) return 0;
  try {
    lockstep::DecodeImage(data, size, 3);
    lockstep::DecodeImage(data, size, 1);  // only images that decode reach the gray paths
  } catch (const lockstep::InvalidInput&) {
  }
  return 0;
}
