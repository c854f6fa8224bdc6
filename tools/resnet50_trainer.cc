// resnet50_trainer: `lockstep train` with --model resnet50 by default, as Caffe2's script of that name.
#include <cstdio>
#include <string>

#include "lockstep/core/version.h"
#include "train_command.h"

int main(int argc, char** argv) {
  // Line by line into a pipe or a file as on a terminal: in a log that merges stdout and stderr, the line
  // that names a failure comes last, after everything printed before it.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  CLI::App app{"resnet50_trainer: train ResNet-50 (or --model) with synchronous SGD"};
  app.set_version_flag("--version", lockstep::BuildDescription, "Print lockstep's version and libraries");
  lockstep::TrainerConfig config;
  config.model = "resnet50";
  lockstep::AddTrainerFlags(&app, &config, /*train=*/true);
  if (auto code = lockstep::ParseCommandLine(&app, argc, argv)) return *code;
  std::string arguments;
  for (int i = 1; i < argc; ++i) arguments += (i > 1 ? " " : "") + std::string(argv[i]);
  return lockstep::ReportErrors([&] { return lockstep::RunTrain(app, config, arguments); });
}
