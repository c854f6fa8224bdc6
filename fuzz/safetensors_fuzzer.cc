// Fuzzes the safetensors reader (header JSON, offsets, tensor bytes) on files of arbitrary bytes.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "lockstep/train/safetensors.h"

namespace {

// The reader takes a path, so each input goes to one in-memory file, rewritten per run.
int MemoryFile() {
  static const int fd = memfd_create("safetensors_fuzzer", 0);
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fd = MemoryFile();
  if (fd < 0 || ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) abort();
  try {
    lockstep::SafetensorsFile file = lockstep::ReadSafetensors("/proc/self/fd/" + std::to_string(fd));
    for (const auto& [name, tensor] : file.tensors)
      if (tensor.nbytes() > 0 && tensor.raw_data() == nullptr) abort();
  } catch (const lockstep::InvalidInput&) {
  }
  return 0;
}
