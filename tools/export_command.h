// The `export` command line: a training checkpoint as an ONNX model for inference runtimes.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "lockstep/train/trainer.h"

namespace lockstep {

struct ExportFlags {
  TrainerConfig config;  // the checkpoint, the model and its input geometry, as `lockstep eval` takes them
  std::string output;    // the .onnx file
  bool softmax = false;  // the graph ends in a Softmax: probabilities instead of logits
};

// Declares the flags on `app`: eval's model and data flags (with --load_model_path), --output and --softmax.
void AddExportFlags(CLI::App* app, ExportFlags* flags);
// Exports, then prints one line: the file, its operators and parameters, its size and the checker's verdict.
int RunExport(const CLI::App& app, ExportFlags flags);

}  // namespace lockstep
