// The lockstep command line: `lockstep train ...`.
#include <string>

#include "lockstep/train/progress.h"
#include "train_command.h"

int main(int argc, char** argv) {
  CLI::App app{"lockstep: synchronous data-parallel training of neural networks"};
  app.require_subcommand(1);
  lockstep::TrainerConfig config;
  bool use_cpu = false;
  CLI::App* train = app.add_subcommand("train", "Train a model from the zoo (writes a CSV log per run)");
  lockstep::AddTrainFlags(train, &config, &use_cpu);
  CLI11_PARSE(app, argc, argv);
  std::string arguments;
  for (int i = 1; i < argc; ++i) arguments += (i > 1 ? " " : "") + std::string(argv[i]);
  return lockstep::ReportErrors([&] { return lockstep::RunTrain(*train, config, use_cpu, arguments); });
}
