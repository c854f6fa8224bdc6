// The model zoo: forward networks by name, from the input blob to the logits blob.
#pragma once

#include <string>
#include <vector>

#include "lockstep/model/model_helper.h"

namespace lockstep {

struct ModelConfig {
  int num_channels = 3;
  int image_size = 224;
  int num_labels = 1000;
  bool is_test = false;  // BN uses running statistics, dropout is off
};

// Adds the named network reading `data` (N, C, H, W) and returns the logits blob (N, num_labels).
// Names: lenet, resnet18, resnet34, resnet50, resnet101, wrn-<depth>-<width> (e.g. wrn-28-10).
std::string BuildModel(const std::string& name, ModelHelper& model, const std::string& data,
                       const ModelConfig& config);
bool IsKnownModel(const std::string& name);
std::string KnownModelsText();  // "lenet, resnet18, ..." for help and errors

std::string BuildLeNet(ModelHelper& model, const std::string& data, const ModelConfig& config);
std::string BuildResNet(ModelHelper& model, const std::string& data, const ModelConfig& config, int depth);
std::string BuildWideResNet(ModelHelper& model, const std::string& data, const ModelConfig& config, int depth,
                            int width);

}  // namespace lockstep
