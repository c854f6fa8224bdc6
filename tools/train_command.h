// The trainer's options (src/lockstep/train/trainer_options.h) as CLI11 flags, shared by `lockstep train`,
// `lockstep eval` and `resnet50_trainer`, and the running of a command with one-line errors.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>

#include "lockstep/train/trainer.h"

namespace lockstep {

// Declares the options of the table on `app`, writing into `config`: with `train`, every option; without,
// those of the model, its data and the devices (`lockstep eval`). The help shows each default as `config`
// holds it.
void AddTrainerFlags(CLI::App* app, TrainerConfig* config, bool train);
// The table's options that the command line gave.
GivenOptions GivenFlags(const CLI::App& app);
// Fills the defaults that depend on the machine, the data and the launcher, then validates; throws
// InvalidInput naming the flag.
TrainerConfig ResolveTrainConfig(const CLI::App& app, TrainerConfig config, const std::string& arguments);
// ResolveTrainConfig, then trains.
int RunTrain(const CLI::App& app, TrainerConfig config, const std::string& arguments);
// For arguments the command (the last subcommand given) does not take: each unknown flag with the flag it
// most likely meant, and where the list of flags is.
std::string UnknownArguments(const CLI::App& app);
// Parses the command line. Returns the exit code when the program is done: 0 after --help or --version, else
// kExitNotRetryable after one line on stderr that names the flag at fault.
std::optional<int> ParseCommandLine(CLI::App* app, int argc, char** argv);
// A CLI11 check of a number's range, worded as the trainer words its own: "must be at least 1, got 0".
// `max` may be infinite.
CLI::Validator InRange(double min, double max);
// A command's default output: `input` with `extension` for its own (checkpoints/m_10.safetensors ->
// checkpoints/m_10.onnx). Throws InvalidInput when that file exists: only an output the user named replaces
// a file.
std::string OutputBeside(const std::string& input, const std::string& extension);
// Runs fn and turns an exception into one line on stderr and an exit code: kExitNotRetryable for InvalidInput
// and NoSpace (running again fails again), kExitFailure for the rest.
int ReportErrors(const std::function<int()>& fn);

}  // namespace lockstep
