// `lockstep plot`: runs `python3 -m lockstep.plot` on the Python package. The package folder is, for an
// installed program, the prefix's (<prefix>/LOCKSTEP_PYTHON_INSTALL_DIR), else the build's
// (LOCKSTEP_PYTHON_DIR, defined by CMake); the environment's LOCKSTEP_PYTHON_DIR names another instead. The
// interpreter is /usr/bin/python3 (Debian's, with numpy and matplotlib) unless LOCKSTEP_PYTHON names one.
#include "plot_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "lockstep/core/enforce.h"
#include "train_command.h"

namespace lockstep {

namespace {

std::string FromEnvironment(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

}  // namespace

void AddPlotFlags(CLI::App* app, PlotFlags* flags) {
  app->add_option("logs", flags->logs,
                  "Per-epoch logs of `lockstep train` (x axis: epochs) or --iter_log CSVs (x axis: "
                  "iterations), not both")
      ->required();
  app->add_option("-o,--output", flags->output,
                  "The PNG to write (replaced atomically when it exists); default: the first log's path with "
                  ".png, which must not exist yet");
  app->add_option("--labels", flags->labels,
                  "Comma-separated legend labels, one per log (default: the file names)");
}

// The folders that may hold lockstep/plot.py, in order: an installed program's own prefix first, so that it
// never runs the code of the build tree it was made in.
std::vector<std::string> PackageFolders() {
  if (const char* given = std::getenv("LOCKSTEP_PYTHON_DIR"); given && *given) return {given};
  std::vector<std::string> folders;
  std::error_code error;
  const std::filesystem::path program = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) folders.push_back((program.parent_path().parent_path() / LOCKSTEP_PYTHON_INSTALL_DIR).string());
  folders.push_back(LOCKSTEP_PYTHON_DIR);
  return folders;
}

int RunPlot(const PlotFlags& flags) {
  const std::vector<std::string> folders = PackageFolders();
  auto found = std::find_if(folders.begin(), folders.end(), [](const std::string& folder) {
    return std::filesystem::is_regular_file(std::filesystem::path(folder) / "lockstep" / "plot.py");
  });
  if (found == folders.end())
    throw InvalidInput(
        fmt::format("plot: the lockstep Python package is not in {} (no lockstep/plot.py there); build the "
                    "package, or set LOCKSTEP_PYTHON_DIR to the folder that holds lockstep/plot.py",
                    fmt::join(folders, " or ")));
  const std::string& python_dir = *found;
  const std::string python = FromEnvironment("LOCKSTEP_PYTHON", "/usr/bin/python3");
  const std::string old_path = FromEnvironment("PYTHONPATH", "");
  const std::string path = old_path.empty() ? python_dir : python_dir + ":" + old_path;
  // LOCKSTEP_PLOT_COMMAND: the module's lines then say "lockstep: error: ...", as every command's do.
  if (setenv("PYTHONPATH", path.c_str(), 1) != 0 || setenv("LOCKSTEP_PLOT_COMMAND", "lockstep plot", 1) != 0)
    throw Error(fmt::format("plot: cannot set the environment of python3: {}", std::strerror(errno)));

  const std::string output = flags.output.empty() ? OutputBeside(flags.logs.front(), ".png") : flags.output;
  // "--" before the logs: a log whose name starts with '-' is still a log.
  std::vector<std::string> arguments = {python, "-m", "lockstep.plot", "-o", output};
  if (!flags.labels.empty()) arguments.insert(arguments.end(), {"--labels", flags.labels});
  arguments.push_back("--");
  arguments.insert(arguments.end(), flags.logs.begin(), flags.logs.end());
  std::vector<char*> argv;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  execvp(argv[0], argv.data());
  throw IoError(
      fmt::format("plot: cannot run {}: {}; set LOCKSTEP_PYTHON to a Python 3 with numpy and "
                  "matplotlib",
                  python, std::strerror(errno)));
}

}  // namespace lockstep
