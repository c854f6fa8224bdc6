// The `eval` command line: a checkpoint's loss and accuracy on test data, without training.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "lockstep/train/trainer.h"

namespace lockstep {

struct EvalFlags {
  TrainerConfig config;
  std::string predictions;   // CSV path, or empty
  bool with_logits = false;  // the predictions carry each record's logits
};

// Declares the flags on `app`: the trainer's model, data and device flags (with the checkpoint and the test
// data), and --predictions.
void AddEvalFlags(CLI::App* app, EvalFlags* flags);
// Checks the flags, evaluates and prints the figures.
int RunEval(const CLI::App& app, EvalFlags flags);

}  // namespace lockstep
