// Peak tensor memory of one ResNet-50 training step (batch 16, 3x224x224, 1000 labels, synthetic data, one
// device through Parallelize) without and with blob sharing (optimize_gradient_memory, or ShareBlobs with
// sizes for a best fit), and the loss of each run, which must be identical.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "lockstep/core/net.h"
#include "lockstep/core/workspace.h"
#include "lockstep/data/batch_reader.h"
#include "lockstep/model/layers.h"
#include "lockstep/model/optimizer.h"
#include "lockstep/model/zoo.h"
#include "lockstep/parallel/data_parallel.h"
#include "lockstep/parallel/memonger.h"

namespace lockstep {
namespace {

constexpr int kBatchSize = 16;
constexpr int kImageSize = 224;
constexpr int kNumLabels = 1000;

struct Model {
  ModelHelper helper{"train"};
  DataParallelModel parallel;
  std::string loss;
};

// One device through Parallelize, so that `optimize_gradient_memory` is the option users set.
void Build(Model* m, bool optimize_gradient_memory, bool share_activations) {
  ParallelOptions options;
  options.devices = {0};
  options.optimize_gradient_memory = optimize_gradient_memory;
  options.share_activations = share_activations;
  options.keep_blobs = {"loss"};
  options.input_builder = [](ModelHelper& model) { layers::ReadBatch(model, "reader", "data", "label"); };
  options.forward_builder = [m](ModelHelper& model, float loss_scale) {
    ModelConfig config{3, kImageSize, kNumLabels, false};
    std::string logits = BuildModel("resnet50", model, model.Scoped("data"), config);
    auto [softmax, loss] = layers::SoftmaxWithLoss(model, logits, model.Scoped("label"), "softmax", "loss");
    m->loss = loss;
    return std::vector<std::string>{layers::Scale(model, loss, "scaled_loss", loss_scale)};
  };
  options.param_update_builder = [](ModelHelper& model) { AddMomentumSgd(model, SgdOptions{}); };
  m->parallel = Parallelize(m->helper, options);
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

// Builds the model as `variant` says, runs the init net and one training step in a fresh workspace.
Result Step(const Variant& variant, const Result& unshared) {
  Model m;
  Build(&m, variant.share && !variant.best_fit, variant.share_activations && !variant.best_fit);
  NetDef net = m.helper.net();
  if (variant.best_fit) {  // ShareBlobs itself, given the sizes of the run without sharing
    MemongerOptions options;
    options.namescope = m.parallel.scopes[0];
    for (const auto& [param, grad] : m.helper.param_to_grad()) options.keep.insert(grad);
    options.keep.insert(m.parallel.losses.begin(), m.parallel.losses.end());
    options.keep.insert(m.loss);
    options.share_activations = variant.share_activations;
    options.blob_bytes = unshared.blob_bytes;
    net = ShareBlobs(net, options);
  }
  Workspace ws;
  ws.SetObject("reader",
               std::make_shared<BatchReader>(
                   std::make_shared<SyntheticSource>(3, kImageSize, kNumLabels, /*seed=*/1), kBatchSize, 1));
  ws.RunNetOnce(m.helper.param_init_net());
  ws.CreateNet(net)->Run();
  Result result{ws.AllocatedBytes(), ws.Blob(m.loss).data<float>()[0], {}};
  for (const auto& name : ws.BlobNames()) result.blob_bytes[name] = ws.Blob(name).capacity();
  return result;
}

// Returns whether every variant's loss equals the loss without sharing.
bool Main() {
  const std::vector<Variant> variants = {
      {"optimize_gradient_memory", true, false, false},
      {"gradients, best fit by size", true, false, true},
      {"optimize_gradient_memory + share_activations", true, true, false},
      {"gradients + activations, best fit by size", true, true, true},
  };
  std::printf("ResNet-50 training step, batch %d, 3x%dx%d, %d labels: tensor memory after the step\n",
              kBatchSize, kImageSize, kImageSize, kNumLabels);
  const Result unshared = Step({"no sharing", false, false, false}, {});
  std::printf("%-46s %8.1f MiB                loss %.9g\n", "no sharing", unshared.bytes / 1048576.0,
              unshared.loss);
  std::fflush(stdout);
  bool identical = true;
  for (const auto& variant : variants) {
    Result result = Step(variant, unshared);
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
