// `lockstep plot`: the subcommand finds the Python package (LOCKSTEP_PYTHON_DIR), passes its arguments to
// `python3 -m lockstep.plot` and lets its one-line errors and exit status through. The drawing itself is
// tested in tests/python/test_plot.py.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "lockstep/core/enforce.h"
#include "test_util.h"

namespace lockstep::testing {

namespace fs = std::filesystem;

namespace {

// Sets LOCKSTEP_PYTHON_DIR for the CLI runs of one test.
class PythonDir {
 public:
  explicit PythonDir(const fs::path& dir) { setenv("LOCKSTEP_PYTHON_DIR", dir.c_str(), 1); }
  ~PythonDir() { unsetenv("LOCKSTEP_PYTHON_DIR"); }
};

// A package folder holding lockstep/plot.py of the source tree, without the compiled rest of the package.
fs::path PlotOnlyPackage(const fs::path& dir) {
  fs::create_directories(dir / "lockstep");
  std::ofstream(dir / "lockstep" / "__init__.py");
  fs::copy_file(fs::path(SourceDir()) / "python" / "lockstep" / "plot.py", dir / "lockstep" / "plot.py",
                fs::copy_options::overwrite_existing);
  return dir;
}

}  // namespace

TEST(PlotCli, MissingLogGivesOneLineAndStatus2) {
  const fs::path dir = FreshDir("plot_missing_log");
  PythonDir python_dir(PlotOnlyPackage(dir / "python"));
  const std::string log = (dir / "missing.log").string();
  CliOutput run = RunCliWithFiles(dir, "plot " + log + " -o " + (dir / "curves.png").string());
  EXPECT_EQ(run.code, kExitNotRetryable);  // running it again fails the same way
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err, "lockstep: error: " + log + ": cannot read it: No such file or directory\n");
  EXPECT_FALSE(fs::exists(dir / "curves.png"));
}

TEST(PlotCli, MissingPackageSaysWhereItLooked) {
  const fs::path dir = FreshDir("plot_missing_package");
  PythonDir python_dir(dir);
  CliOutput run = RunCliWithFiles(dir, "plot run.log -o curves.png");
  EXPECT_EQ(run.code, kExitNotRetryable);
  EXPECT_EQ(run.err, "lockstep: error: plot: the lockstep Python package is not in " + dir.string() +
                         " (no lockstep/plot.py there); build the package, or set LOCKSTEP_PYTHON_DIR to the "
                         "folder that holds lockstep/plot.py\n");
}

// Without -o the PNG goes beside the first log under its name, never over a file already there.
TEST(PlotCli, OutputDefaultsBesideTheFirstLogAndHelpDescribesIt) {
  const fs::path dir = FreshDir("plot_default_output");
  PythonDir python_dir(PlotOnlyPackage(dir / "python"));
  CliOutput missing = RunCliWithFiles(dir, "plot " + (dir / "missing.log").string());
  EXPECT_EQ(missing.code, kExitNotRetryable) << "the plot ran, and found no log";
  EXPECT_NE(missing.err.find("missing.log: cannot read it"), std::string::npos) << missing.err;
  std::ofstream(dir / "run.png") << "an earlier plot";
  CliOutput taken = RunCliWithFiles(dir, "plot " + (dir / "run.log").string());
  EXPECT_EQ(taken.code, kExitNotRetryable);
  EXPECT_EQ(taken.err,
            "lockstep: error: " + (dir / "run.png").string() +
                " exists: pass --output to name the file to write (a file named there is replaced)\n");
  CliOutput help = RunCliWithFiles(::testing::TempDir(), "plot --help");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("training loss, training accuracy, test accuracy and images/s"), std::string::npos)
      << help.out;
  EXPECT_NE(help.out.find("-o,--output"), std::string::npos);
  EXPECT_NE(help.out.find("--labels"), std::string::npos);
}

}  // namespace lockstep::testing
