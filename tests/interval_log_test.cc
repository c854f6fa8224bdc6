// Progress for job logs: the interval lines a run prints on stderr when it is not a terminal, the --iter_log
// CSV beside the unchanged per-epoch log, and `lockstep --version`.
#include "lockstep/train/interval_log.h"

#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>

#include "lockstep/core/cpu_isa.h"
#include "lockstep/core/enforce.h"
#include "lockstep/core/version.h"
#include "test_util.h"

namespace lockstep::testing {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

double Seconds(const std::string& hours, const std::string& minutes, const std::string& seconds) {
  return std::stod(hours) * 3600 + std::stod(minutes) * 60 + std::stod(seconds);
}

// 2 epochs of 8 steps of LeNet on synthetic data, a progress line and an --iter_log row after every step.
const std::string kTinyRun =
    "train --use_cpu --model lenet --train_data null --num_channels 1 --image_size 28 --num_labels 10 "
    "--batch_size 8 --epoch_size 64 --num_epochs 2 --threads 1 --base_learning_rate 0.05 --log_every_iters "
    "1 ";

}  // namespace

TEST(IntervalLog, DurationText) {
  EXPECT_EQ(DurationText(0), "0:00:00");
  EXPECT_EQ(DurationText(59.6), "0:01:00");
  EXPECT_EQ(DurationText(3723.4), "1:02:03");
  EXPECT_EQ(DurationText(-5), "0:00:00");
  EXPECT_EQ(DurationText(100 * 3600), "100:00:00");
}

TEST(IntervalLog, DueEveryNSteps) {
  IntervalLogOptions options;
  options.every_iters = 3;
  options.to_stderr = false;
  options.csv_path = (FreshDir("interval_due") / "rows.csv").string();
  options.images_per_step = 4;
  options.iterations_per_epoch = 6;
  options.num_epochs = 1;
  IntervalLog log(options);
  std::vector<int> due;
  for (int step = 1; step <= 6; ++step)
    if (log.StepDone(step, step == 6)) {
      due.push_back(step);
      log.Report({1, step, 0.5, 0.25, 0.1});
    }
  EXPECT_EQ(due, (std::vector<int>{3, 6}));
  auto rows = Lines(ReadFile(options.csv_path));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], IntervalLog::kCsvHeader);
  EXPECT_TRUE(std::regex_match(
      rows[2], std::regex(R"([\d.]+,[\d.]+,1,6,6,[\d.]+,0\.500000,0\.250000,0\.1,0\.0,0\.0)")))
      << rows[2];

  // A run resumed after step 4 of the job reports on the job's steps 6 and 9, as the uninterrupted one did.
  options.csv_path = (FreshDir("interval_due_resumed") / "rows.csv").string();
  IntervalLog resumed(options);
  due.clear();
  for (int step = 5; step <= 9; ++step)
    if (resumed.StepDone(step, false)) due.push_back(step);
  EXPECT_EQ(due, (std::vector<int>{6, 9}));

  IntervalLogOptions silent = options;
  silent.csv_path.clear();  // neither stderr nor a file: nothing is ever due
  IntervalLog quiet(silent);
  for (int step = 1; step <= 6; ++step) EXPECT_FALSE(quiet.StepDone(step, step == 6));
}

// Two runs given one --iter_log would interleave their rows: the second is refused while the first runs.
TEST(IntervalLog, ALogInUseIsRefused) {
  IntervalLogOptions options;
  options.to_stderr = false;
  options.csv_path = (FreshDir("interval_in_use") / "rows.csv").string();
  options.images_per_step = 1;
  options.iterations_per_epoch = 1;
  options.num_epochs = 1;
  auto first = std::make_unique<IntervalLog>(options);
  try {
    IntervalLog second(options);
    FAIL() << "a second log of one file was opened";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()), "--iter_log " + options.csv_path +
                                         ": another running process writes this log; pass another file, or "
                                         "wait until that run ends");
  }
  first.reset();
  IntervalLog after(options);  // the lock ends with its writer
  EXPECT_EQ(Lines(ReadFile(options.csv_path)), std::vector<std::string>{IntervalLog::kCsvHeader});
}

// Stderr is a file here, as in a cluster job: a line per step (--log_every_iters 1) with every field, the
// ETA of the epoch and of the run counting down to zero; stdout starts with the version line; the per-epoch
// log keeps Caffe2's format; --iter_log has the same rows, and a second run appends to it.
TEST(IntervalLog, NonTerminalRunPrintsProgressLinesAndIterLogRows) {
  fs::path dir = FreshDir("interval_run");
  const std::string iter_log = (dir / "iter.csv").string();
  CliOutput run = RunCliWithFiles(dir, kTinyRun + "--log_dir " + dir.string() + " --iter_log " + iter_log);
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(Lines(run.out).at(0), VersionLine());

  const std::regex line(
      R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ epoch (\d)/2 iter (\d+)/8: ([\d.]+) img/s, loss ([\d.]+), accuracy )"
      R"(([\d.]+), lr ([\d.e-]+), ETA epoch (\d+):(\d\d):(\d\d), run (\d+):(\d\d):(\d\d))");
  auto lines = Lines(run.err);
  ASSERT_EQ(lines.size(), 16u) << run.err;
  for (size_t k = 0; k < lines.size(); ++k) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(lines[k], m, line)) << lines[k];
    EXPECT_EQ(std::stoi(m[1]), static_cast<int>(k / 8 + 1));
    EXPECT_EQ(std::stoi(m[2]), static_cast<int>(k % 8 + 1));
    EXPECT_GT(std::stod(m[3]), 0);
    EXPECT_GT(std::stod(m[4]), 0);
    EXPECT_LE(std::stod(m[5]), 1);
    EXPECT_EQ(std::stod(m[6]), 0.05);
    const double epoch_eta = Seconds(m[7], m[8], m[9]), run_eta = Seconds(m[10], m[11], m[12]);
    EXPECT_LE(epoch_eta, run_eta) << lines[k];
    if (k % 8 == 7) {
      EXPECT_EQ(epoch_eta, 0) << "the epoch's last step";
    }
  }
  EXPECT_NE(lines.back().find("ETA epoch 0:00:00, run 0:00:00"), std::string::npos) << lines.back();

  std::vector<fs::path> logs;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".log") logs.push_back(entry.path());
  ASSERT_EQ(logs.size(), 1u);
  auto epoch_rows = Lines(ReadFile(logs[0]));
  ASSERT_EQ(epoch_rows.size(), 4u) << "the arguments, the header and a row per epoch";
  EXPECT_EQ(epoch_rows[0].rfind("# train --use_cpu", 0), 0u) << epoch_rows[0];

  auto rows = Lines(ReadFile(iter_log));
  ASSERT_EQ(rows.size(), 17u);
  EXPECT_EQ(rows[0], IntervalLog::kCsvHeader);
  const std::regex row(R"([\d.]+,[\d.]+,(\d),(\d+),8,[\d.]+,[\d.]+,[\d.]+,0\.05,([\d.]+),([\d.]+))");
  for (size_t k = 1; k < rows.size(); ++k) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(rows[k], m, row)) << rows[k];
    EXPECT_EQ(std::stoi(m[1]), static_cast<int>((k - 1) / 8 + 1));
    EXPECT_EQ(std::stoi(m[2]), static_cast<int>((k - 1) % 8 + 1));
  }
  EXPECT_TRUE(std::regex_search(rows.back(), std::regex(",0\\.0,0\\.0$"))) << rows.back();

  fs::path again = FreshDir("interval_run_again");
  ASSERT_EQ(RunCliWithFiles(again, kTinyRun + "--log_dir " + again.string() + " --iter_log " + iter_log).code,
            0);
  rows = Lines(ReadFile(iter_log));
  EXPECT_EQ(rows.size(), 33u) << "appended, one header";
  EXPECT_EQ(std::count(rows.begin(), rows.end(), std::string(IntervalLog::kCsvHeader)), 1);

  // A file of something else is refused, before any step, and left as it was.
  const std::string other = (again / "notes.txt").string();
  std::ofstream(other) << "my notes\n";
  CliOutput refused =
      RunCliWithFiles(again, kTinyRun + "--log_dir " + again.string() + " --iter_log " + other);
  EXPECT_EQ(refused.code, kExitNotRetryable);
  EXPECT_NE(
      refused.err.find("lockstep: error: --iter_log " + other + ": the file exists and is no iteration log"),
      std::string::npos)
      << refused.err;
  EXPECT_EQ(ReadFile(other), "my notes\n");
}

TEST(IntervalLog, NoLinesByDefaultOnAShortRun) {
  fs::path dir = FreshDir("interval_default");
  CliOutput run =
      RunCliWithFiles(dir,
                      "train --use_cpu --model lenet --train_data null --num_channels 1 --image_size 28 "
                      "--num_labels 10 --batch_size 8 --epoch_size 16 --threads 1 --log_dir " +
                          dir.string());
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(run.err, "") << "the first line is due after 60 s";
}

// A run shorter than --log_every_secs still fills --iter_log: a row at each epoch's last step, none on
// stderr.
TEST(IntervalLog, IterLogHasARowAtEveryEpochsEnd) {
  fs::path dir = FreshDir("interval_epoch_rows");
  const std::string iter_log = (dir / "curves" / "iter.csv").string();
  CliOutput run = RunCliWithFiles(
      dir,
      "train --use_cpu --model lenet --train_data null --num_channels 1 --image_size 28 --num_labels 10 "
      "--batch_size 8 --epoch_size 64 --num_epochs 2 --threads 1 --base_learning_rate 0.05 --log_dir " +
          dir.string() + " --iter_log " + iter_log);
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(run.err, "") << "no line is due on stderr";
  auto rows = Lines(ReadFile(iter_log));
  ASSERT_EQ(rows.size(), 3u) << "the header and a row per epoch";
  EXPECT_EQ(rows[0], IntervalLog::kCsvHeader);
  const std::regex row(R"([\d.]+,[\d.]+,(\d),8,8,[\d.]+,[\d.]+,[\d.]+,0\.05,0\.0,([\d.]+))");
  for (size_t k = 1; k < rows.size(); ++k) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(rows[k], m, row)) << rows[k];
    EXPECT_EQ(std::stoi(m[1]), static_cast<int>(k));
  }
  EXPECT_TRUE(std::regex_search(rows.back(), std::regex(",0\\.0,0\\.0$"))) << rows.back();
}

TEST(Version, PrintsVersionCommitAndLibraries) {
  fs::path dir = FreshDir("version");
  CliOutput run = RunCliWithFiles(dir, "--version");
  ASSERT_EQ(run.code, 0) << run.err;
  auto lines = Lines(run.out);
  ASSERT_GE(lines.size(), 2u) << run.out;
  EXPECT_EQ(lines[0], VersionLine());
  EXPECT_TRUE(std::regex_match(
      lines[0], std::regex(R"(lockstep \d+\.\d+\.\d+ \(git ([0-9a-f]{12}(-dirty)?|unknown)\))")))
      << lines[0];
  EXPECT_EQ(lines[0], fmt::format("lockstep {} (git {})", LOCKSTEP_VERSION, GitCommit()));
  EXPECT_TRUE(std::regex_match(
      lines[1], std::regex(R"(oneDNN \d+\.\d+\.\d+( \(git \w+\))?, CPU kernels for [a-z0-9_]+)")))
      << lines[1];
  EXPECT_NE(lines[1].find(CpuIsaName()), std::string::npos) << lines[1];
#ifdef LOCKSTEP_WITH_CUDA
  ASSERT_EQ(lines.size(), 5u) << run.out;
  EXPECT_TRUE(std::regex_match(lines[2], std::regex(R"(CUDA runtime \d+\.\d+ \(driver (\d+\.\d+|none)\))")))
      << lines[2];
  EXPECT_TRUE(std::regex_match(lines[3], std::regex(R"(cuDNN \d+\.\d+\.\d+)"))) << lines[3];
  EXPECT_TRUE(std::regex_match(lines[4], std::regex(R"(NCCL \d+\.\d+\.\d+)"))) << lines[4];
#else
  EXPECT_EQ(lines.size(), 2u) << run.out;
#endif
}

}  // namespace lockstep::testing
