// Fuzzes PNG decoding (libpng plus lockstep's expansion, alpha dropping and gray conversion). A mutator
// rewrites every chunk's CRC after mutating, or libpng would refuse nearly every input at its first chunk.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "lockstep/core/enforce.h"
#include "lockstep/data/image.h"

namespace {

const uint8_t kMagic[] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};

uint32_t BigEndian32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | p[2] << 8 | p[3];
}

// Each chunk is a 4-byte length, a 4-byte type, the data and a CRC of type and data.
void FixChunkCrcs(uint8_t* data, size_t size) {
  size_t offset = sizeof(kMagic);
  while (offset + 12 <= size) {
    uint32_t length = BigEndian32(data + offset);
    if (length > size - offset - 12) return;
    uint32_t crc = crc32(0, data + offset + 4, length + 4);
    uint8_t* out = data + offset + 8 + length;
    for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(crc >> (24 - 8 * i));
    offset += 12 + length;
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int) {
  size = LLVMFuzzerMutate(data, size, max_size);
  if (size >= sizeof(kMagic)) FixChunkCrcs(data, size);
  return size;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // DecodeImage picks the decoder by magic bytes; JPEG has a fuzzer of its own.
  if (size < sizeof(kMagic) || std::memcmp(data, kMagic, sizeof(kMagic)) != 0) return 0;
  try {
    lockstep::DecodeImage(data, size, 3);
    lockstep::DecodeImage(data, size, 1);  // only images that decode reach the gray paths
  } catch (const lockstep::InvalidInput&) {
  }
  return 0;
}
