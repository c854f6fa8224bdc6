// bfloat16 training on the CPU (--dtype bfloat16 --use_cpu): what the trainer refuses, and LeNet and
// ResNet-18 losses against float32 from the same initial parameters and data.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <optional>

#include "lockstep/core/cpu_isa.h"
#include "lockstep/train/trainer.h"
#include "synthetic_lenet.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

// Sets an environment variable for the processes the test starts, and restores it afterwards.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnvironment() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(CpuBFloat16Training, Float16AndCpusWithoutBFloat16InstructionsAreRefusedInOneLine) {
  const std::string train = "train --use_cpu --model lenet --train_data null --num_epochs 1 ";
  CliOutput run = RunCliWithFiles(::testing::TempDir(), train + "--dtype float16");
  EXPECT_EQ(run.code, kExitNotRetryable);
  EXPECT_EQ(
      run.err,
      "lockstep: error: --dtype float16, --float16_compute and --enable_tensor_core need a GPU; CPUs train "
      "in float or bfloat16\n");
  ScopedEnvironment avx2("ONEDNN_MAX_CPU_ISA", "AVX2");
  run = RunCliWithFiles(::testing::TempDir(), train + "--dtype bfloat16");
  EXPECT_EQ(run.code, kExitNotRetryable);
  EXPECT_EQ(
      run.err,
      "lockstep: error: --dtype bfloat16 on CPU needs AVX512_BF16 or AMX instructions, and oneDNN uses avx2 "
      "here; compute in float instead\n");
}

std::vector<std::string> SplitCsvLine(const std::string& line) {
  std::vector<std::string> fields(1);
  for (char c : line) {
    if (c == ',')
      fields.emplace_back();
    else
      fields.back().push_back(c);
  }
  return fields;
}

// The loss of every step of `config`, trained in `dtype` (from the iteration log).
std::vector<double> StepLosses(TrainerConfig config, const std::string& dtype) {
  config.dtype = dtype;
  config.save_model_name += "_" + dtype;
  config.iter_log = config.log_dir + "/" + dtype + "_steps.csv";
  config.log_every_iters = 1;
  Train(config);
  std::ifstream log(config.iter_log);
  std::string line;
  std::getline(log, line);
  const auto header = SplitCsvLine(line);
  const auto column = std::find(header.begin(), header.end(), "loss") - header.begin();
  std::vector<double> losses;
  while (std::getline(log, line)) losses.push_back(std::stod(SplitCsvLine(line).at(column)));
  return losses;
}

double Mean(const std::vector<double>& values) {
  return std::accumulate(values.begin(), values.end(), 0.0) / values.size();
}

// Each layer rounds what it stores to bfloat16 (2^-9 relative); over ResNet-18's 20 layers those errors add
// like a random walk to about 1% of the logits, so the first step's loss (same parameters, same data) is
// within 3% of float32's. The updates then differ a little every step and the runs drift apart, but they
// descend alike: the mean loss over the run stays within 5% (1% was measured for ResNet-18, 0.01% for LeNet).
TEST(CpuBFloat16Training, LeNetAndResNet18LossesTrackFloat32) {
  if (!CpuHasBFloat16Instructions())
    GTEST_SKIP() << "no AVX512_BF16 or AMX (oneDNN uses " << CpuIsaName() << ")";
  TrainerConfig lenet = SyntheticLeNet(FreshDir("bf16_lenet").string());
  TrainerConfig resnet = SyntheticLeNet(FreshDir("bf16_resnet18").string());
  resnet.model = "resnet18";
  resnet.num_channels = 3;
  resnet.image_size = 32;
  resnet.batch_size = 16;
  resnet.epoch_size = 16 * 20;
  resnet.num_epochs = 1;
  resnet.base_learning_rate = 0.001f;
  for (const TrainerConfig& config : {lenet, resnet}) {
    SCOPED_TRACE(config.model);
    const std::vector<double> float32 = StepLosses(config, "float"),
                              bfloat16 = StepLosses(config, "bfloat16");
    ASSERT_EQ(bfloat16.size(), float32.size());
    EXPECT_NEAR(bfloat16.front(), float32.front(), 0.03 * float32.front());
    EXPECT_NEAR(Mean(bfloat16), Mean(float32), 0.05 * Mean(float32));
    EXPECT_LT(Mean(bfloat16), bfloat16.front()) << "it learns";
  }
}

}  // namespace
}  // namespace lockstep::testing
