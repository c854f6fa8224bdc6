// ShardsFromLauncher: the shard id, count and job id that mpirun or srun put in the environment, and one-line
// errors for values that cannot be shards.
#include "lockstep/comm/launcher.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>

#include "lockstep/core/enforce.h"

namespace lockstep::testing {
namespace {

// Clears the launchers' variables for the test and restores them afterwards.
class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kVariables) {
      if (const char* value = std::getenv(name)) saved_[name] = value;
      unsetenv(name);
    }
  }
  void TearDown() override {
    for (const char* name : kVariables) {
      auto it = saved_.find(name);
      if (it == saved_.end())
        unsetenv(name);
      else
        setenv(name, it->second.c_str(), 1);
    }
  }

  static void Set(const char* name, const char* value) { setenv(name, value, 1); }

  // The message of the InvalidInput that ShardsFromLauncher throws.
  static std::string Refusal() {
    try {
      ShardsFromLauncher();
    } catch (const InvalidInput& e) {
      return e.what();
    }
    ADD_FAILURE() << "accepted";
    return "";
  }

  static constexpr const char* kVariables[] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                               "PMIX_NAMESPACE",       "SLURM_PROCID",
                                               "SLURM_NTASKS",         "SLURM_JOB_ID"};
  std::map<std::string, std::string> saved_;
};

TEST_F(LauncherTest, NoLauncher) {
  EXPECT_FALSE(ShardsFromLauncher());
  Set("OMPI_COMM_WORLD_RANK", "0");  // a rank without a size is not a launch
  Set("SLURM_NTASKS", "2");
  EXPECT_FALSE(ShardsFromLauncher());
}

TEST_F(LauncherTest, Mpirun) {
  Set("OMPI_COMM_WORLD_RANK", "2");
  Set("OMPI_COMM_WORLD_SIZE", "4");
  std::optional<LauncherShards> shards = ShardsFromLauncher();
  ASSERT_TRUE(shards);
  EXPECT_EQ(shards->launcher, "mpirun");
  EXPECT_EQ(shards->shard_id, 2);
  EXPECT_EQ(shards->num_shards, 4);
  EXPECT_EQ(shards->job_id, "");
  Set("PMIX_NAMESPACE", "prterun-host-1234@1");
  EXPECT_EQ(ShardsFromLauncher()->job_id, "prterun-host-1234@1");
}

TEST_F(LauncherTest, Srun) {
  Set("SLURM_PROCID", "0");
  Set("SLURM_NTASKS", "3");
  Set("SLURM_JOB_ID", "81722");
  std::optional<LauncherShards> shards = ShardsFromLauncher();
  ASSERT_TRUE(shards);
  EXPECT_EQ(shards->launcher, "srun");
  EXPECT_EQ(shards->shard_id, 0);
  EXPECT_EQ(shards->num_shards, 3);
  EXPECT_EQ(shards->job_id, "81722");
}

TEST_F(LauncherTest, ValuesThatCannotBeShardsAreRefused) {
  Set("OMPI_COMM_WORLD_RANK", "4");
  Set("OMPI_COMM_WORLD_SIZE", "4");
  EXPECT_NE(Refusal().find("OMPI_COMM_WORLD_RANK=4 is not below OMPI_COMM_WORLD_SIZE=4"), std::string::npos);
  Set("OMPI_COMM_WORLD_RANK", "one");
  EXPECT_NE(Refusal().find("OMPI_COMM_WORLD_RANK='one'"), std::string::npos);
  Set("OMPI_COMM_WORLD_RANK", "");
  EXPECT_NE(Refusal().find("OMPI_COMM_WORLD_RANK=''"), std::string::npos);
  Set("OMPI_COMM_WORLD_RANK", "-1");
  EXPECT_NE(Refusal().find("OMPI_COMM_WORLD_RANK='-1'"), std::string::npos);
  Set("OMPI_COMM_WORLD_RANK", "0");
  Set("OMPI_COMM_WORLD_SIZE", "0");
  EXPECT_NE(Refusal().find("OMPI_COMM_WORLD_SIZE=0"), std::string::npos);
  Set("OMPI_COMM_WORLD_SIZE", "2x");
  EXPECT_NE(Refusal().find("OMPI_COMM_WORLD_SIZE='2x'"), std::string::npos);

  unsetenv("OMPI_COMM_WORLD_RANK");
  Set("SLURM_PROCID", "3");
  Set("SLURM_NTASKS", "2");
  EXPECT_NE(Refusal().find("SLURM_PROCID=3 is not below SLURM_NTASKS=2"), std::string::npos);
}

}  // namespace
}  // namespace lockstep::testing
