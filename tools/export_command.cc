// `lockstep export`: the checkpoint's model in inference mode as ONNX (src/lockstep/train/onnx_checkpoint.h).
#include "export_command.h"

#include <chrono>

#include "lockstep/train/onnx_checkpoint.h"
#include "train_command.h"

namespace lockstep {

void AddExportFlags(CLI::App* app, ExportFlags* flags) {
  AddTrainerFlags(app, &flags->config, /*train=*/false);
  app->add_option(
      "--output", flags->output,
      "The ONNX file to write, *.onnx (atomically, after ONNX's checker passes); default: the checkpoint's "
      "path with .onnx for .safetensors, which must not exist yet");
  app->add_flag("--softmax", flags->softmax,
                "End the graph with a Softmax: its output is 'probabilities' instead of 'logits'");
  app->footer(
      "The model and its input geometry come from the checkpoint (flags that contradict them are refused). "
      "--test_data decides the input normalization written into the model's metadata.");
}

int RunExport(const CLI::App& app, ExportFlags flags) {
  const auto start = std::chrono::steady_clock::now();
  if (flags.output.empty() && !flags.config.load_model_path.empty())
    flags.output = OutputBeside(flags.config.load_model_path, ".onnx");
  const OnnxExportSummary summary =
      ExportCheckpointToOnnx(flags.config, GivenFlags(app), flags.output, flags.softmax);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print(
      "{}: {} ONNX nodes (opset {}), {} parameters in {} initializers, {:.1f} MB, checker {}, {:.2f} s\n",
      flags.output, summary.node_types.size(), kOnnxOpsetVersion, summary.parameter_values,
      summary.initializers, summary.file_bytes / 1e6, summary.checker, seconds);
  return 0;
}

}  // namespace lockstep
