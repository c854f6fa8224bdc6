// The lockstep command line: `lockstep train ...`, `lockstep eval ...`, `lockstep make-db ...`,
// `lockstep plot ...`, `lockstep launch ... -- train ...`, `lockstep ops [TYPE]`, `lockstep export ...` and
// `lockstep --version`.
#include <cstdio>
#include <string>

#include "eval_command.h"
#include "export_command.h"
#include "launch_command.h"
#include "lockstep/core/version.h"
#include "make_db_command.h"
#include "ops_command.h"
#include "plot_command.h"
#include "train_command.h"

int main(int argc, char** argv) {
  // Line by line into a pipe or a file as on a terminal: in a log that merges stdout and stderr, the line
  // that names a failure comes last, after everything printed before it.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  CLI::App app{"lockstep: synchronous data-parallel training of neural networks"};
  app.set_version_flag(
      "--version", lockstep::BuildDescription,
      "Print lockstep's version and git commit, and the versions of oneDNN (and CUDA, cuDNN and "
      "NCCL when built in)");
  app.require_subcommand(1);
  lockstep::TrainerConfig config;
  CLI::App* train = app.add_subcommand("train", "Train a model from the zoo (writes a CSV log per run)");
  lockstep::AddTrainerFlags(train, &config, /*train=*/true);
  lockstep::EvalFlags eval_flags;
  CLI::App* eval = app.add_subcommand(
      "eval",
      "Evaluate a checkpoint on test data without training: loss, top-1 and top-5 accuracy, and optionally "
      "a CSV of per-record predictions");
  lockstep::AddEvalFlags(eval, &eval_flags);
  lockstep::MakeDbFlags make_db_flags;
  CLI::App* make_db = app.add_subcommand(
      "make-db",
      "Write an image database (LMDB or LevelDB, Datum or TensorProtos) from a folder of images, "
      "idx files or CIFAR-10 batches");
  lockstep::AddMakeDbFlags(make_db, &make_db_flags);
  lockstep::PlotFlags plot_flags;
  CLI::App* plot = app.add_subcommand(
      "plot",
      "Draw training curves from CSV logs into a PNG: training loss, training accuracy, test accuracy and "
      "images/s, one line per log (runs python3 -m lockstep.plot)");
  lockstep::AddPlotFlags(plot, &plot_flags);
  lockstep::LaunchFlags launch_flags;
  CLI::App* launch = app.add_subcommand(
      "launch",
      "Run the shards of a training job on this machine (`lockstep launch [flags] -- train ARGS...`), and "
      "restart the job from its newest checkpoint when a shard fails or stalls");
  lockstep::AddLaunchFlags(launch, &launch_flags);
  lockstep::ExportFlags export_flags;
  CLI::App* export_model = app.add_subcommand(
      "export",
      "Write a checkpoint's model as ONNX for inference (BN on its running statistics, no dropout), "
      "validated by ONNX's checker");
  lockstep::AddExportFlags(export_model, &export_flags);
  lockstep::OpsFlags ops_flags;
  CLI::App* ops = app.add_subcommand(
      "ops",
      "List the operators, or print one's inputs, outputs and arguments with their defaults (`ops Conv`)");
  lockstep::AddOpsFlags(ops, &ops_flags);
  if (argc == 1) {  // a first try: what the subcommands are, rather than only that one is required
    app.name("lockstep");
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  // `--` ends the agent's flags: what follows is the training command, passed to the shards.
  const int parsed_argc = argc > 1 && std::string(argv[1]) == "launch"
                              ? lockstep::SplitLaunchCommand(argc, argv, &launch_flags)
                              : argc;
  if (auto code = lockstep::ParseCommandLine(&app, parsed_argc, argv)) return *code;
  if (launch->parsed()) {
    launch_flags.unknown = launch->remaining();
    return lockstep::ReportErrors([&] { return lockstep::RunLaunch(launch_flags); });
  }
  if (make_db->parsed()) return lockstep::ReportErrors([&] { return lockstep::RunMakeDb(make_db_flags); });
  if (plot->parsed()) return lockstep::ReportErrors([&] { return lockstep::RunPlot(plot_flags); });
  if (ops->parsed()) return lockstep::ReportErrors([&] { return lockstep::RunOps(ops_flags); });
  if (export_model->parsed())
    return lockstep::ReportErrors([&] { return lockstep::RunExport(*export_model, export_flags); });
  if (eval->parsed()) return lockstep::ReportErrors([&] { return lockstep::RunEval(*eval, eval_flags); });
  std::string arguments;
  for (int i = 1; i < argc; ++i) arguments += (i > 1 ? " " : "") + std::string(argv[i]);
  return lockstep::ReportErrors([&] { return lockstep::RunTrain(*train, config, arguments); });
}
