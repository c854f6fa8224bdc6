// Fuzzes PNG decoding (libpng plus lockstep's expansion, alpha dropping and gray conversion).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "lockstep/core/enforce.h"
#include "lockstep/data/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // DecodeImage picks the decoder by magic bytes; JPEG has a fuzzer of its own.
  static const uint8_t kMagic[] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  if (size < sizeof(kMagic) || std::memcmp(data, kMagic, sizeof(kMagic)) != 0) return 0;
  try {
    lockstep::DecodeImage(data, size, 3);
    lockstep::DecodeImage(data, size, 1);  // only images that decode reach the gray paths
  } catch (const lockstep::InvalidInput&) {
  }
  return 0;
}
