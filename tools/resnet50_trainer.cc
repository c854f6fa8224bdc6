// resnet50_trainer: `lockstep train` with --model resnet50 by default, as Caffe2's script of that name.
#include <string>

#include "train_command.h"

int main(int argc, char** argv) {
  CLI::App app{"resnet50_trainer: train ResNet-50 (or --model) with synchronous SGD"};
  lockstep::TrainerConfig config;
  config.model = "resnet50";
  bool use_cpu = false;
  lockstep::AddTrainFlags(&app, &config, &use_cpu);
  CLI11_PARSE(app, argc, argv);
  std::string arguments;
  for (int i = 1; i < argc; ++i) arguments += (i > 1 ? " " : "") + std::string(argv[i]);
  return lockstep::ReportErrors([&] { return lockstep::RunTrain(app, config, use_cpu, arguments); });
}
