// Wide ResNet d-k (Zagoruyko & Komodakis) for CIFAR-sized input, as in the Torch seed: 3x3 conv 16, three
// stages of (d-4)/6 pre-activation basic blocks with widths 16k, 32k, 64k (strides 1, 2, 2), BN + relu,
// global average pool, FC.
#include "lockstep/model/layers.h"
#include "lockstep/model/zoo.h"

namespace lockstep {

std::string BuildWideResNet(ModelHelper& model, const std::string& data, const ModelConfig& config, int depth,
                            int width) {
  // The bounds keep to networks that build in moments (depth 1000 has 166 blocks a stage).
  if (depth < 10 || depth > 1000 || (depth - 4) % 6 != 0 || width < 1 || width > 64)
    throw InvalidInput(fmt::format(
        "wrn-{}-{}: depth must be 6n+4 from 10 to 1000 (10, 16, 22, 28, 40, ...) and width from 1 to 64",
        depth, width));
  const int blocks = (depth - 4) / 6;
  auto conv = [&](const std::string& in, const std::string& name, int dim_in, int dim_out, int kernel,
                  int stride) {
    layers::ConvOptions options;
    options.stride = stride;
    options.pad = kernel / 2;
    options.bias = false;
    options.weight_init = FillSpec::Msra();
    return layers::Conv(model, in, name, dim_in, dim_out, kernel, options);
  };
  // relu(BN(in)) in one fused operator, output "<name>_bn".
  auto bn_relu = [&](const std::string& in, const std::string& name, int channels) {
    return layers::SpatialBN(model, in, name + "_bn", channels, config.is_test, /*relu=*/true);
  };

  std::string x = conv(data, "conv1", config.num_channels, 16, 3, 1);
  int dim_in = 16;
  for (int stage = 0; stage < 3; ++stage) {
    int dim_out = (16 << stage) * width;
    for (int b = 0; b < blocks; ++b) {
      int stride = (stage > 0 && b == 0) ? 2 : 1;
      std::string name = fmt::format("wrn{}_{}", stage + 2, b);
      std::string pre = bn_relu(x, name + "_pre", dim_in);
      std::string y = conv(pre, name + "_conv1", dim_in, dim_out, 3, stride);
      y = bn_relu(y, name + "_mid", dim_out);
      y = conv(y, name + "_conv2", dim_out, dim_out, 3, 1);
      std::string shortcut =
          (dim_in != dim_out || stride != 1) ? conv(pre, name + "_shortcut", dim_in, dim_out, 1, stride) : x;
      x = layers::Add(model, y, shortcut, name + "_sum");
      dim_in = dim_out;
    }
  }
  x = bn_relu(x, "final", dim_in);
  x = layers::GlobalAveragePool(model, x, "final_avg");
  return layers::FC(model, x, "last_out", dim_in, config.num_labels);
}

}  // namespace lockstep
