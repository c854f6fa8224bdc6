// AtomicFile: the file appears whole on Commit, never in part, and no temporary is left behind.
#include "lockstep/core/atomic_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "lockstep/core/enforce.h"
#include "shards.h"

namespace lockstep::testing {
namespace {

namespace fs = std::filesystem;

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

size_t Entries(const std::string& directory) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(directory), fs::directory_iterator()));
}

TEST(AtomicFile, AppearsWholeOnCommitAndReplacesTheOldFile) {
  TempDirectory dir;
  const std::string path = dir / "f.txt";
  WriteFileAtomically(path, "old", "test file");
  AtomicFile file(path, "test file");
  file.Write("new ");
  EXPECT_EQ(Contents(path), "old");  // the writes go elsewhere until Commit
  file.Write(std::string("contents"));
  file.Commit();
  EXPECT_EQ(Contents(path), "new contents");
  EXPECT_EQ(Entries(dir.path()), 1u);
}

TEST(AtomicFile, UncommittedLeavesNothing) {
  TempDirectory dir;
  {
    AtomicFile file(dir / "f.txt", "test file");
    file.Write("partial");
  }
  EXPECT_EQ(Entries(dir.path()), 0u);
}

TEST(AtomicFile, CommitIfAbsentNeverReplaces) {
  TempDirectory dir;
  const std::string path = dir / "entry";
  AtomicFile first(path, "test file");
  first.Write("first");
  EXPECT_TRUE(first.CommitIfAbsent());
  AtomicFile second(path, "test file");
  second.Write("second");
  EXPECT_FALSE(second.CommitIfAbsent());
  EXPECT_EQ(Contents(path), "first");
}

TEST(AtomicFile, AMissingFolderIsAnIoErrorNamingTheFile) {
  TempDirectory dir;
  try {
    AtomicFile file(dir / "missing/f.txt", "test file");
    FAIL() << "expected an error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create test file " + (dir / "missing/f.txt")),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lockstep::testing
