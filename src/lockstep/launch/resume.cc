#include "lockstep/launch/resume.h"

#include <fmt/core.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <tuple>

#include "lockstep/core/enforce.h"
#include "lockstep/train/safetensors.h"

namespace lockstep {
namespace {

int64_t MetadataInteger(const SafetensorsFile& file, const std::string& key) {
  auto it = file.metadata.find(key);
  return it == file.metadata.end() ? -1 : std::stoll(it->second);
}

}  // namespace

std::optional<std::string> NewestCheckpoint(const std::string& directory, const std::string& name) {
  namespace fs = std::filesystem;
  const std::string prefix = name + "_", suffix = ".safetensors";
  const fs::path where = directory.empty() ? fs::path(".") : fs::path(directory);
  std::error_code error;
  std::optional<std::string> newest;
  std::tuple<int64_t, int64_t> newest_position{-1, -1};  // (iteration, epochs_done)
  for (const auto& entry : fs::directory_iterator(where, error)) {
    const std::string file = entry.path().filename().string();
    if (file.size() <= prefix.size() + suffix.size() || file.rfind(prefix, 0) != 0 ||
        file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    try {
      SafetensorsFile checkpoint = ReadSafetensors(entry.path().string());
      std::tuple<int64_t, int64_t> position{MetadataInteger(checkpoint, "iteration"),
                                            MetadataInteger(checkpoint, "epochs_done")};
      if (!newest || position > newest_position) {
        newest = entry.path().string();
        newest_position = position;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "lockstep launch: skipping checkpoint %s: %s\n", entry.path().c_str(), e.what());
    }
  }
  return newest;
}

}  // namespace lockstep
