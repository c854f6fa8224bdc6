// Peak tensor memory of one ResNet-50 training step (batch 16, 3x224x224, 1000 labels, synthetic data)
// without and with blob sharing (ShareBlobs), and the loss of each run, which must be identical.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "lockstep/core/net.h"
#include "lockstep/core/workspace.h"
#include "lockstep/data/batch_source.h"
#include "lockstep/model/layers.h"
#include "lockstep/model/optimizer.h"
#include "lockstep/model/zoo.h"
#include "lockstep/parallel/memonger.h"

namespace lockstep {
namespace {

constexpr int kBatchSize = 16;
constexpr int kImageSize = 224;
constexpr int kNumLabels = 1000;

struct Model {
  ModelHelper helper{"train"};
  std::string loss, accuracy, lr;
};

void Build(Model* m) {
  ModelConfig config{3, kImageSize, kNumLabels, false};
  std::string logits = BuildModel("resnet50", m->helper, "data", config);
  auto [softmax, loss] = layers::SoftmaxWithLoss(m->helper, logits, "label", "softmax", "loss");
  m->loss = loss;
  m->accuracy = layers::Accuracy(m->helper, softmax, "label", "accuracy");
  m->helper.AddGradientOperators({loss});
  m->lr = AddMomentumSgd(m->helper, SgdOptions{}).lr;
  NetDef& init = m->helper.param_init_net();
  for (int i = 0; i < init.op_size(); ++i)
    init.mutable_op(i)->mutable_device_option()->set_random_seed(1 + i);
}

struct Variant {
  const char* name;
  bool share;
  bool share_activations;
  bool best_fit;  // pass the blob sizes of the run without sharing, so that slots are chosen by size
};

struct Result {
  size_t bytes;
  float loss;
  std::map<std::string, size_t> blob_bytes;
};

// Runs the init net and one training step in a fresh workspace, with blobs shared as `variant` says.
Result Step(Model& m, const Variant& variant, const Result& unshared) {
  NetDef net = m.helper.net();
  if (variant.share) {
    MemongerOptions options;
    for (const auto& [param, grad] : m.helper.param_to_grad()) options.keep.insert(grad);
    options.keep.insert({m.loss, m.accuracy, m.lr});
    options.share_activations = variant.share_activations;
    if (variant.best_fit) options.blob_bytes = unshared.blob_bytes;
    net = ShareBlobs(net, options);
  }
  Workspace ws;
  ws.RunNetOnce(m.helper.param_init_net());
  SyntheticSource source(3, kImageSize, kNumLabels, /*seed=*/1);
  source.Fill(0, kBatchSize, ws.CreateBlob("data"), ws.CreateBlob("label"));
  ws.CreateNet(net)->Run();
  Result result{ws.AllocatedBytes(), ws.Blob(m.loss).data<float>()[0], {}};
  for (const auto& name : ws.BlobNames()) result.blob_bytes[name] = ws.Blob(name).capacity();
  return result;
}

// Returns whether every variant's loss equals the loss without sharing.
bool Main() {
  Model model;
  Build(&model);
  const std::vector<Variant> variants = {
      {"gradients, most recently freed", true, false, false},
      {"gradients, best fit by size", true, false, true},
      {"gradients + activations, most recently freed", true, true, false},
      {"gradients + activations, best fit by size", true, true, true},
  };
  std::printf("ResNet-50 training step, batch %d, 3x%dx%d, %d labels: tensor memory after the step\n",
              kBatchSize, kImageSize, kImageSize, kNumLabels);
  const Result unshared = Step(model, {"no sharing", false, false, false}, {});
  std::printf("%-46s %8.1f MiB                loss %.9g\n", "no sharing", unshared.bytes / 1048576.0,
              unshared.loss);
  std::fflush(stdout);
  bool identical = true;
  for (const auto& variant : variants) {
    Result result = Step(model, variant, unshared);
    identical &= result.loss == unshared.loss;
    std::printf("%-46s %8.1f MiB  %5.1f%% less  loss %.9g\n", variant.name, result.bytes / 1048576.0,
                100.0 * (1.0 - static_cast<double>(result.bytes) / unshared.bytes), result.loss);
    std::fflush(stdout);
  }
  std::printf("losses %s\n", identical ? "identical" : "DIFFER");
  return identical;
}

}  // namespace
}  // namespace lockstep

int main() { return lockstep::Main() ? 0 : 1; }
