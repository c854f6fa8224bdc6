// Safetensors files: a little-endian u64 header length, a JSON header giving each tensor's dtype, shape and
// byte range, then the raw bytes. PyTorch, NumPy and JAX read them, so checkpoints leave lockstep freely.
#pragma once

#include <map>
#include <string>

#include "lockstep/core/tensor.h"

namespace lockstep {

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;  // the "__metadata__" entry
};

// Writes to "<path>.tmp.<pid>", syncs and renames, so `path` holds either the old file or the whole new one.
// Tensors are stored in name order; the metadata gets the CRC32 of every tensor ("crc32:<name>") and of the
// header ("header_crc32"), keys the caller may not use. Throws IoError when the file cannot be written.
void WriteSafetensors(const std::string& path, const std::map<std::string, const Tensor*>& tensors,
                      const std::map<std::string, std::string>& metadata);

// Throws IoError when the file cannot be opened or read, InvalidInput when it is truncated or corrupt: a
// recorded CRC32 that does not match, named with its tensor (files without checksums, as other tools write
// them, are read unchecked). The returned metadata holds no checksums.
SafetensorsFile ReadSafetensors(const std::string& path);
// Only the "__metadata__" entry, after validating the whole header as ReadSafetensors does; no tensor bytes
// are read. Throws as ReadSafetensors.
std::map<std::string, std::string> ReadSafetensorsMetadata(const std::string& path);
// Checks the whole file as ReadSafetensors does, a few MiB in memory at a time. Throws as ReadSafetensors.
void VerifySafetensors(const std::string& path);

}  // namespace lockstep
