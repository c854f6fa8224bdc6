// The `plot` command line: training curves from CSV logs into a PNG, drawn by the Python package's
// lockstep.plot (python/lockstep/plot.py).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace lockstep {

struct PlotFlags {
  std::vector<std::string> logs;
  std::string output;
  std::string labels;  // comma-separated, or empty
};

void AddPlotFlags(CLI::App* app, PlotFlags* flags);
// Replaces this process with `python3 -m lockstep.plot`, so that its output and exit status are the
// command's; returns only after one line on stderr when the package or the interpreter is missing.
int RunPlot(const PlotFlags& flags);

}  // namespace lockstep
