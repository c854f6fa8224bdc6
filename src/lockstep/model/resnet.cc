// ResNet-18/34 (basic blocks) and ResNet-50/101 (bottleneck blocks), in Caffe2's resnet_builder layout:
// conv 7x7/2 + BN + relu + maxpool 3/2, four stages, global average pool, FC. Convolutions have no bias
// (BN follows) and MSRA init; a projection shortcut (1x1 conv + BN) where the shape changes; the stride of a
// down-sampling bottleneck sits on its 3x3 convolution.
#include "lockstep/model/layers.h"
#include "lockstep/model/zoo.h"

namespace lockstep {

namespace {

class ResNetBuilder {
 public:
  ResNetBuilder(ModelHelper& model, bool is_test) : model_(model), is_test_(is_test) {}

  std::string ConvBN(const std::string& in, const std::string& name, int dim_in, int dim_out, int kernel,
                     int stride, bool relu) {
    layers::ConvOptions options;
    options.stride = stride;
    options.pad = kernel / 2;
    options.bias = false;
    options.weight_init = FillSpec::Msra();
    std::string x = layers::Conv(model_, in, name, dim_in, dim_out, kernel, options);
    // A fused relu saves a pass over the activation forward and backward; "<name>_bn" then holds relu(BN).
    return layers::SpatialBN(model_, x, name + "_bn", dim_out, is_test_, relu);
  }

  // Output = relu(residual(in) + shortcut(in)).
  std::string Block(const std::string& in, const std::string& name, int dim_in, int dim_base, int dim_out,
                    int stride, bool bottleneck) {
    std::string x;
    if (bottleneck) {
      x = ConvBN(in, name + "_conv1", dim_in, dim_base, 1, 1, true);
      x = ConvBN(x, name + "_conv2", dim_base, dim_base, 3, stride, true);
      x = ConvBN(x, name + "_conv3", dim_base, dim_out, 1, 1, false);
    } else {
      x = ConvBN(in, name + "_conv1", dim_in, dim_out, 3, stride, true);
      x = ConvBN(x, name + "_conv2", dim_out, dim_out, 3, 1, false);
    }
    std::string shortcut = in;
    if (dim_in != dim_out || stride != 1)
      shortcut = ConvBN(in, name + "_shortcut", dim_in, dim_out, 1, stride, false);
    x = layers::Add(model_, x, shortcut, name + "_sum");
    return layers::Relu(model_, x, name + "_relu");
  }

 private:
  ModelHelper& model_;
  bool is_test_;
};

}  // namespace

std::string BuildResNet(ModelHelper& model, const std::string& data, const ModelConfig& config, int depth) {
  std::vector<int> blocks;
  bool bottleneck = depth >= 50;
  switch (depth) {
    case 18:
      blocks = {2, 2, 2, 2};
      break;
    case 34:
      blocks = {3, 4, 6, 3};
      break;
    case 50:
      blocks = {3, 4, 6, 3};
      break;
    case 101:
      blocks = {3, 4, 23, 3};
      break;
    default:
      throw InvalidInput(fmt::format("ResNet depth must be 18, 34, 50 or 101, got {}", depth));
  }
  if (config.image_size < 32)
    throw InvalidInput(
        fmt::format("resnet{} needs --image_size of at least 32, got {}", depth, config.image_size));
  ResNetBuilder builder(model, config.is_test);
  std::string x = builder.ConvBN(data, "conv1", config.num_channels, 64, 7, 2, true);
  x = layers::MaxPool(model, x, "pool1", 3, 2, 1);
  const int expansion = bottleneck ? 4 : 1;
  int dim_in = 64;
  for (int stage = 0; stage < 4; ++stage) {
    int dim_base = 64 << stage;
    for (int b = 0; b < blocks[stage]; ++b) {
      int stride = (stage > 0 && b == 0) ? 2 : 1;
      std::string name = fmt::format("res{}_{}", stage + 2, b);
      x = builder.Block(x, name, dim_in, dim_base, dim_base * expansion, stride, bottleneck);
      dim_in = dim_base * expansion;
    }
  }
  x = layers::GlobalAveragePool(model, x, "final_avg");
  return layers::FC(model, x, "last_out", dim_in, config.num_labels);
}

}  // namespace lockstep
