// LeNet as in the d2l multi-GPU chapter: conv 20@3x3, relu, avgpool 2, conv 50@5x5, relu, avgpool 2,
// fc -> 128, relu, fc -> labels; every weight N(0, 0.01), biases 0.
#include "lockstep/model/layers.h"
#include "lockstep/model/zoo.h"

namespace lockstep {

std::string BuildLeNet(ModelHelper& model, const std::string& data, const ModelConfig& config) {
  const FillSpec weight = FillSpec::Gaussian(0.01f);
  const int conv1_size = config.image_size - 2;  // 3x3, no padding
  const int pool1_size = conv1_size / 2;
  const int conv2_size = pool1_size - 4;  // 5x5, no padding
  const int pool2_size = conv2_size / 2;
  if (pool2_size < 1)
    throw InvalidInput(fmt::format("lenet needs --image_size of at least 14, got {}", config.image_size));
  layers::ConvOptions conv;
  conv.weight_init = weight;
  std::string x = layers::Conv(model, data, "conv1", config.num_channels, 20, 3, conv);
  x = layers::Relu(model, x, "relu1");
  x = layers::AveragePool(model, x, "pool1", 2, 2);
  x = layers::Conv(model, x, "conv2", 20, 50, 5, conv);
  x = layers::Relu(model, x, "relu2");
  x = layers::AveragePool(model, x, "pool2", 2, 2);
  x = layers::FC(model, x, "fc3", 50 * pool2_size * pool2_size, 128, weight);
  x = layers::Relu(model, x, "relu3");
  return layers::FC(model, x, "fc4", 128, config.num_labels, weight);
}

}  // namespace lockstep
