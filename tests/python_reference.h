// Reference data that /usr/bin/python3 (Pillow, numpy) writes for the image tests: a script from tests/ runs
// into a temporary directory and lists its images in manifest.txt ("name height width channels", pixels in
// name.raw). Tests skip when the interpreter or its modules are missing.
#pragma once

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "lockstep/data/image.h"
#include "shards.h"
#include "test_util.h"

namespace lockstep::testing {

inline constexpr const char* kPython = "/usr/bin/python3";

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Runs tests/<script> with `dir` as its argument; false when python3 lacks Pillow or numpy. The script's
// output is in dir/log.txt.
inline bool RunPythonReference(const std::string& script, const TempDirectory& dir) {
  if (std::system((std::string(kPython) + " -c 'import PIL, numpy' 2>/dev/null").c_str()) != 0) return false;
  std::string command = std::string(kPython) + " " + SourceDir() + "/tests/" + script + " " + dir.path() +
                        " > " + (dir / "log.txt") + " 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << ReadBytes(dir / "log.txt");
  return true;
}

inline std::map<std::string, Image> ReadReferenceImages(const TempDirectory& dir) {
  std::map<std::string, Image> images;
  std::ifstream manifest(dir / "manifest.txt");
  std::string name;
  int height, width, channels;
  while (manifest >> name >> height >> width >> channels) {
    std::string pixels = ReadBytes(dir / (name + ".raw"));
    images[name] = Image{height, width, channels, std::vector<uint8_t>(pixels.begin(), pixels.end())};
  }
  return images;
}

}  // namespace lockstep::testing
