// The per-epoch CSV log: a run never writes over another's log, even one that took the same name in the same
// second (a restarted shard); it takes the next free name instead.
#include "lockstep/train/csv_log.h"

#include <filesystem>

#include "test_util.h"

namespace lockstep::testing {

TEST(CsvLog, ARunInTheSameSecondTakesTheNextFreeName) {
  const std::filesystem::path dir = FreshDir("csv_log_same_second");
  const std::string name = "lenet_gpu1_b8_L10_lr0.10_v2_20261125_150034_shard1.log";
  CsvLog first(dir.string(), name, "first run");
  first.Append(EpochRecord{});
  CsvLog second(dir.string(), name, "second run");
  CsvLog third(dir.string(), name, "third run");
  EXPECT_EQ(first.path(), (dir / name).string());
  EXPECT_EQ(second.path(), (dir / "lenet_gpu1_b8_L10_lr0.10_v2_20261125_150034_shard1_2.log").string());
  EXPECT_EQ(third.path(), (dir / "lenet_gpu1_b8_L10_lr0.10_v2_20261125_150034_shard1_3.log").string());
  EXPECT_EQ(ReadFile(first.path()).rfind("# first run\n", 0), 0u) << "the first log is left as it was";
  EXPECT_EQ(ReadFile(second.path()), std::string("# second run\n") + CsvLog::kHeader + "\n");
}

TEST(CsvLog, AMissingDirectoryIsAnErrorNamingThePath) {
  const std::filesystem::path dir = FreshDir("csv_log_missing") / "absent";
  try {
    CsvLog log(dir.string(), "run.log", "");
    FAIL() << "created a log in a missing directory";
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot create log file " + (dir / "run.log").string() + ": No such file or directory");
  }
}

}  // namespace lockstep::testing
