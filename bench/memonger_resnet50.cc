// Peak tensor memory of one ResNet-50 training step (batch 16, 3x224x224, 1000 labels, synthetic data, one
// device through Parallelize) without sharing, with gradient blobs shared (Caffe2's memonger) and with the
// memory plan (every blob, best fit from the shape functions), the plan's prediction, and the loss of each
// run, which must be identical.
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

// One device through Parallelize, with or without the memory plan (share_buffers, the default).
void Build(Model* m, bool share_buffers) {
  ParallelOptions options;
  options.devices = {0};
  options.share_buffers = share_buffers;
  options.input_shapes = {{"data", {{kBatchSize, 3, kImageSize, kImageSize}, DataType::kFloat}},
                          {"label", {{kBatchSize}, DataType::kInt32}}};
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

enum class Sharing { kNone, kGradients, kPlan };

struct Result {
  size_t bytes;
  float loss;
  size_t planned;  // the plan's tensor memory (kPlan only)
};

// Builds the model with `sharing`, runs the init net and one training step in a fresh workspace.
Result Step(Sharing sharing) {
  Model m;
  Build(&m, sharing == Sharing::kPlan);
  NetDef net = m.helper.net();
  if (sharing == Sharing::kGradients) {  // Caffe2's memonger: gradient blobs only
    MemongerOptions options;
    options.namescopes = {m.parallel.scopes[0]};
    for (const auto& [param, grad] : m.helper.param_to_grad()) options.keep.insert(grad);
    options.keep.insert(m.parallel.losses.begin(), m.parallel.losses.end());
    options.keep.insert(m.loss);
    net = ShareBlobs(net, options);
  }
  Workspace ws;
  ws.SetObject("reader",
               std::make_shared<BatchReader>(
                   std::make_shared<SyntheticSource>(3, kImageSize, kNumLabels, /*seed=*/1), kBatchSize, 1));
  ws.RunNetOnce(m.helper.param_init_net());
  ws.CreateNet(net)->Run();
  return {ws.AllocatedBytes(), ws.Blob(m.loss).data<float>()[0], m.parallel.memory_plan.Total()};
}

// Returns whether every variant's loss equals the loss without sharing.
bool Main() {
  std::printf("ResNet-50 training step, batch %d, 3x%dx%d, %d labels: tensor memory after the step\n",
              kBatchSize, kImageSize, kImageSize, kNumLabels);
  const Result unshared = Step(Sharing::kNone);
  std::printf("%-40s %8.1f MiB                loss %.9g\n", "no sharing (--share_buffers=false)",
              unshared.bytes / 1048576.0, unshared.loss);
  std::fflush(stdout);
  bool identical = true;
  for (auto [name, sharing] : {std::pair{"gradients only (Caffe2's memonger)", Sharing::kGradients},
                               std::pair{"the memory plan (the default)", Sharing::kPlan}}) {
    Result result = Step(sharing);
    identical &= result.loss == unshared.loss;
    std::printf("%-40s %8.1f MiB  %5.1f%% less  loss %.9g", name, result.bytes / 1048576.0,
                100.0 * (1.0 - static_cast<double>(result.bytes) / unshared.bytes), result.loss);
    if (sharing == Sharing::kPlan)
      std::printf("  (planned %.1f MiB, %+.1f%%)", result.planned / 1048576.0,
                  100.0 * (static_cast<double>(result.planned) / result.bytes - 1.0));
    std::printf("\n");
    std::fflush(stdout);
  }
  std::printf("losses %s\n", identical ? "identical" : "DIFFER");
  return identical;
}

}  // namespace
}  // namespace lockstep

int main() { return lockstep::Main() ? 0 : 1; }
