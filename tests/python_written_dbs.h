// A test fixture with the databases that Python's lmdb and plyvel write (tests/write_image_dbs.py): 2 types x
// Datum/TensorProtos x raw/encoded, and the manifest of their keys, labels and pixels. Tests skip when
// /usr/bin/python3 lacks the modules.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "shards.h"
#include "test_util.h"

namespace lockstep::testing {

class PythonWrittenDbs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::access(kPython, X_OK) != 0) return;
    if (std::system(fmt::format("{} -c 'import lmdb, plyvel, PIL, numpy' 2>/dev/null", kPython).c_str()) != 0)
      return;
    dir_ = new TempDirectory;
    std::string command =
        fmt::format("{} {}/tests/write_image_dbs.py {}", kPython, SourceDir(), dir_->path());
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    std::ifstream in(*dir_ / "manifest.json");
    manifest_ = nlohmann::json::parse(in);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!dir_) GTEST_SKIP() << kPython << " lacks lmdb, plyvel, PIL or numpy";
  }

  static constexpr const char* kPython = "/usr/bin/python3";
  static inline TempDirectory* dir_ = nullptr;
  static inline nlohmann::json manifest_;
};

}  // namespace lockstep::testing
