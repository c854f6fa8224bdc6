// A training checkpoint's model as ONNX for inference, as `lockstep export` writes it: the zoo model the
// checkpoint records, built as `lockstep eval` builds it, and metadata that says how its input is read.
#pragma once

#include <string>

#include "lockstep/train/onnx_export.h"
#include "lockstep/train/trainer_config.h"

namespace lockstep {

// A training checkpoint (config.load_model_path) as ONNX: the zoo model config.model (unless `given` names
// "model": the "model" of the checkpoint's metadata) in test mode with config's geometry (num_channels,
// image_size, num_labels; fashion-mnist's with test_data fashion-mnist), as `lockstep eval` builds it,
// reading "data" (N, C, H, W) and answering "logits" (N, num_labels), or "probabilities" with softmax. The
// metadata records the model, the checkpoint's training state and the input's name, shape, layout and
// normalization (that of config.test_data's reader when given).
OnnxExportSummary ExportCheckpointToOnnx(TrainerConfig config, const GivenOptions& given,
                                         const std::string& path, bool softmax = false);

// How lockstep's reader of `data` turns stored pixels into the network's input, for the model's metadata;
// without data, as `trained_scaling` (the checkpoint's record, InputScaling()) says its training data was
// read.
std::string InputNormalizationText(const TrainerConfig& config, const std::string& data,
                                   const std::string& trained_scaling);

}  // namespace lockstep
