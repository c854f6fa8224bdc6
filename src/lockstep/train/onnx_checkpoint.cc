// A training checkpoint's model as ONNX: the test net of `lockstep eval`, its parameters from the checkpoint.
#include "lockstep/train/onnx_checkpoint.h"

#include <filesystem>

#include "lockstep/core/output_directory.h"
#include "lockstep/core/workspace.h"
#include "lockstep/data/open_batch_source.h"
#include "lockstep/model/model_helper.h"
#include "lockstep/model/zoo.h"
#include "lockstep/train/checkpoint.h"

namespace lockstep {

std::string InputNormalizationText(const TrainerConfig& config, const std::string& data,
                                   const std::string& trained_scaling) {
  if (data == "fashion-mnist")
    return "x = pixel * (1/255) in float32, pixel the 0..255 gray value of Fashion-MNIST's idx files (1 "
           "channel, 28 x 28)";
  if ((data.empty() || data == "null") && trained_scaling == InputScaling("fashion-mnist"))
    return "x = pixel * (1/255) in float32, as its training data was read (the checkpoint records it)";
  if ((data.empty() || data == "null") && !trained_scaling.empty())
    return "x[c] = (pixel[c] - 128) / 128 per channel, as its training data was read (the checkpoint records "
           "it; export with --test_data for the channel order and resizing)";
  if (data.empty() || data == "null")
    return "not recorded (exported without --test_data): lockstep reads fashion-mnist as pixel * (1/255) and "
           "image databases as (pixel - 128) / 128 per channel";
  const std::string order =
      config.num_channels == 1
          ? ""
          : fmt::format(", channels in {} order", config.color_order == "rgb" ? "RGB" : "BGR");
  return fmt::format(
      "x[c] = (pixel[c] - 128) / 128{}, after resizing each image so its shortest side is {} and cropping "
      "its centre to {} x {}",
      order, ResizedSide(config.scale, config.image_size), config.image_size, config.image_size);
}

OnnxExportSummary ExportCheckpointToOnnx(TrainerConfig config, const GivenOptions& given,
                                         const std::string& path, bool softmax) {
  if (config.load_model_path.empty())
    throw InvalidInput("--load_model_path is required: the checkpoint to export");
  PrepareOutputFile(path, "--output");
  if (std::filesystem::path(path).extension() != ".onnx")
    throw InvalidInput(fmt::format("--output '{}': the model is ONNX; name the file *.onnx", path));
  ResolveDataDefaults(config.test_data, given, &config);
  ResolveModelFromCheckpoint(given, /*train=*/false, &config);  // the model and geometry it records
  // --test_data read as lockstep eval reads it, so that the reading recorded in the metadata holds.
  if (!config.test_data.empty() && IsDatabase(config.test_data)) {
    CheckEvaluationData(config);
    Tensor images, labels;
    OpenBatchSource(DataSpec(config.test_data, config, false))->Fill(0, 1, &images, &labels);
  }
  const std::string& model_name = config.model;
  if (!IsKnownModel(model_name))
    throw InvalidInput(fmt::format("--model {} is not in the zoo: {}", model_name, KnownModelsText()));

  // The test net of `lockstep eval`: the zoo model in test mode, its parameters from the checkpoint.
  ModelHelper model("export");
  ModelConfig geometry{config.num_channels, config.image_size, config.num_labels, /*is_test=*/true};
  const std::string logits = BuildModel(model_name, model, "data", geometry);
  Workspace ws;
  ws.RunNetOnce(model.param_init_net());
  TrainerState state = LoadCheckpointParameters(config.load_model_path, &ws, "", model.GetParams());

  OnnxGraphSpec spec;
  spec.input = "data";
  spec.input_shape = {1, config.num_channels, config.image_size, config.image_size};
  spec.output = logits;
  spec.softmax = softmax;
  spec.output_name = softmax ? "probabilities" : "logits";
  spec.graph_name = model_name;
  spec.metadata = {{"model", model_name},
                   {"num_labels", std::to_string(config.num_labels)},
                   {"input_normalization",
                    InputNormalizationText(config, config.test_data,
                                           ReadModelDescription(config.load_model_path).input_scaling)},
                   {"checkpoint", config.load_model_path},
                   {"checkpoint_epochs_done", std::to_string(state.epochs_done)},
                   {"checkpoint_iteration", std::to_string(state.iteration)}};
  return ExportOnnx(model.net(), ws, spec, path);
}

}  // namespace lockstep
