// Model lookup by name.
#include "lockstep/model/zoo.h"

#include <cstdio>

namespace lockstep {

namespace {
// "wrn-<depth>-<width>" with both numbers written plainly (no sign, leading zero or space).
bool ParseWideResNet(const std::string& name, int* depth, int* width) {
  char tail = 0;
  return std::sscanf(name.c_str(), "wrn-%9d-%9d%c", depth, width, &tail) == 2 &&
         name == fmt::format("wrn-{}-{}", *depth, *width);
}
int ResNetDepth(const std::string& name) {
  for (int depth : {18, 34, 50, 101})
    if (name == "resnet" + std::to_string(depth)) return depth;
  return 0;
}
}  // namespace

bool IsKnownModel(const std::string& name) {
  int depth, width;
  return name == "lenet" || ResNetDepth(name) > 0 || ParseWideResNet(name, &depth, &width);
}

std::string KnownModelsText() {
  return "lenet, resnet18, resnet34, resnet50, resnet101, wrn-<depth>-<width>";
}

std::string BuildModel(const std::string& name, ModelHelper& model, const std::string& data,
                       const ModelConfig& config) {
  if (name == "lenet") return BuildLeNet(model, data, config);
  if (int depth = ResNetDepth(name)) return BuildResNet(model, data, config, depth);
  int depth, width;
  if (ParseWideResNet(name, &depth, &width)) return BuildWideResNet(model, data, config, depth, width);
  throw InvalidInput(fmt::format("unknown model '{}'; choose one of: {}", name, KnownModelsText()));
}

}  // namespace lockstep
