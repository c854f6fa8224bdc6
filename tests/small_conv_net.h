// A small convolutional network for the model-parallel tests: deep enough to split into three stages.
#pragma once

#include <string>

#include "lockstep/model/layers.h"

namespace lockstep::testing {

// conv 3x3 (1 -> 4) -> relu -> max pool 2 -> conv 3x3 (4 -> 6) -> relu -> FC (96 -> 16) -> relu -> FC (16 ->
// 5) on 8x8 images; returns the logits.
inline std::string BuildConvNet(ModelHelper& model, const std::string& data) {
  layers::ConvOptions conv;
  conv.pad = 1;
  conv.weight_init = FillSpec::Gaussian(0.3f);
  std::string x = layers::Conv(model, data, "conv1", 1, 4, 3, conv);
  x = layers::Relu(model, x, "relu1");
  x = layers::MaxPool(model, x, "pool1", 2, 2);
  x = layers::Conv(model, x, "conv2", 4, 6, 3, conv);
  x = layers::Relu(model, x, "relu2");
  x = layers::FC(model, x, "fc1", 6 * 4 * 4, 16, FillSpec::Gaussian(0.1f));
  x = layers::Relu(model, x, "relu3");
  return layers::FC(model, x, "fc2", 16, 5, FillSpec::Gaussian(0.1f));
}

}  // namespace lockstep::testing
