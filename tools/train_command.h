// The `train` command line (shared by `lockstep train` and `resnet50_trainer`).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "lockstep/train/trainer.h"

namespace lockstep {

// Declares the flags on `app` with the seed's defaults, writing into `config`.
void AddTrainFlags(CLI::App* app, TrainerConfig* config, bool* use_cpu);
// The flags of the model, its input data and the devices, which training and evaluation share.
void AddModelAndDataFlags(CLI::App* app, TrainerConfig* config, bool* use_cpu);
// --use_cpu, or the CUDA devices of --gpus / --num_gpus, which must exist.
void ResolveDevices(const CLI::App& app, bool use_cpu, TrainerConfig* config);
// fashion-mnist fixes the input geometry: fills it, and checks explicit flags against it.
void ApplyFashionMnistGeometry(const CLI::App& app, TrainerConfig* config);
// Checks flag combinations that CLI11 cannot express, fills dataset-dependent defaults and validates the
// result; throws InvalidInput naming the flag.
TrainerConfig ResolveTrainConfig(const CLI::App& app, TrainerConfig config, bool use_cpu,
                                 const std::string& arguments);
// ResolveTrainConfig, then trains.
int RunTrain(const CLI::App& app, TrainerConfig config, bool use_cpu, const std::string& arguments);
// Runs fn and turns a lockstep::Error into one line on stderr and exit code 1.
int ReportErrors(const std::function<int()>& fn);

}  // namespace lockstep
