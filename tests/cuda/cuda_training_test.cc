// Training on CUDA devices (skipped without a GPU): one GPU trains like the CPU; two logical devices on one
// GPU (the copy-and-sum path) train like one device with the same total batch; mixed precision trains.
#include <cmath>
#include <numeric>

#include "lockstep/core/device_backend.h"
#include "lockstep/data/batch_reader.h"
#include "lockstep/model/layers.h"
#include "lockstep/model/mixed_precision.h"
#include "lockstep/model/optimizer.h"
#include "lockstep/parallel/data_parallel.h"
#include "small_conv_net.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

bool HaveGpu() {
  DeviceBackend* cuda = FindDeviceBackend(DeviceType::kCuda);
  return cuda && cuda->DeviceCount() > 0;
}

constexpr int kBatch = 16;

struct Job {
  DeviceType type = DeviceType::kCuda;
  int devices = 1;
  DataType compute = DataType::kFloat;
  float learning_rate = 0.1f;
};

using Params = std::map<std::string, std::vector<float>>;

// Replica 0's parameters (on the host) after `steps` steps of the small conv net, and the loss of each step.
std::pair<Params, std::vector<float>> Train(const Job& run, int steps) {
  ParallelOptions o;
  o.device_type = run.type;
  o.devices.resize(run.devices);
  std::iota(o.devices.begin(), o.devices.end(), 0);
  o.threads_per_device = 1;
  o.max_threads = 2;
  const int64_t batch = kBatch / run.devices;  // with the readers' shapes the memory plan places every blob
  o.input_shapes = {{"data", {{batch, 1, 8, 8}, DataType::kFloat}}, {"label", {{batch}, DataType::kInt32}}};
  const float loss_scale = run.compute == DataType::kFloat16 ? 128.0f : 1.0f;
  o.input_builder = [](ModelHelper& model) { layers::ReadBatch(model, "reader", "data", "label"); };
  o.forward_builder = [&](ModelHelper& model, float scale) {
    const int first = model.net().op_size();
    std::string logits = BuildConvNet(model, model.Scoped("data"));
    if (run.compute != DataType::kFloat)
      logits = ComputeInLowPrecision(model, first, model.Scoped("data"), logits, run.compute);
    auto [softmax, loss] = layers::SoftmaxWithLoss(model, logits, model.Scoped("label"), "softmax", "loss");
    return std::vector<std::string>{layers::Scale(model, loss, "scaled_loss", scale * loss_scale)};
  };
  o.param_update_builder = [&](ModelHelper& model) {
    UnscaleGradients(model, loss_scale);
    SgdOptions sgd;
    sgd.base_learning_rate = run.learning_rate;
    AddMomentumSgd(model, sgd);
  };
  ModelHelper model("train");
  DataParallelModel dp = Parallelize(model, o);
  Workspace ws;
  auto source = std::make_shared<SyntheticSource>(1, 8, 5, /*seed=*/3);
  ws.SetObject("reader", std::make_shared<BatchReader>(source, kBatch / run.devices, run.devices));
  ws.RunNetOnce(model.param_init_net());
  Net* net = ws.CreateNet(model.net());
  std::vector<float> losses;
  for (int step = 0; step < steps; ++step) {
    net->Run();
    Tensor loss;
    loss.CopyFrom(ws.Blob(dp.scopes[0] + "loss"));
    losses.push_back(loss.data<float>()[0]);
  }
  Params params;
  for (const auto& name : model.GetTrainableParams(dp.scopes[0])) {
    Tensor host;
    host.CopyFrom(ws.Blob(name));
    params[name.substr(dp.scopes[0].size())] = Values(host);
  }
  return {params, losses};
}

void ExpectClose(const Params& a, const Params& b, double tolerance, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  double worst = 0;
  for (const auto& [name, values] : b) {
    double difference = RelativeDifference(a.at(name), values);
    EXPECT_LE(difference, tolerance) << what << ": " << name;
    worst = std::max(worst, difference);
  }
  std::printf("%s: largest relative difference %.2e\n", what.c_str(), worst);
}

TEST(CudaTraining, OneGpuTrainsLikeTheCpu) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  Job cpu;
  cpu.type = DeviceType::kCpu;
  ExpectClose(Train({}, 20).first, Train(cpu, 20).first, 1e-4, "gpu:0 vs cpu:0 after 20 steps");
}

TEST(CudaTraining, TwoLogicalDevicesOnOneGpuTrainLikeOne) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  Job two;
  two.devices = 2;
  ExpectClose(Train(two, 20).first, Train({}, 20).first, 1e-4, "gpu:0,1 vs gpu:0 after 20 steps");
}

// One step's change (new - old) of all parameters, concatenated in name order.
std::vector<float> Step(const Params& before, const Params& after) {
  std::vector<float> step;
  for (const auto& [name, values] : after)
    for (size_t i = 0; i < values.size(); ++i) step.push_back(values[i] - before.at(name)[i]);
  return step;
}

// The first update computed through 16-bit operators moves the parameters as the float32 update does, to
// the precision of the 16-bit type. Taken over all parameters together, since a bias gradient alone is a sum
// of terms of both signs whose relative error has no bound. An H100 gave 1.1e-2 (float16, loss scale 128)
// and 2.1e-2 (bfloat16).
TEST(CudaTraining, MixedPrecisionStepFollowsFloat32) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  const Params initial = Train({}, 0).first;
  const std::vector<float> float_step = Step(initial, Train({}, 1).first);
  for (auto [type, tolerance] : {std::pair{DataType::kFloat16, 3e-2}, std::pair{DataType::kBFloat16, 6e-2}}) {
    Job run;
    run.compute = type;
    const double difference = RelativeDifference(Step(initial, Train(run, 1).first), float_step);
    std::printf("%s step vs float32 step: relative difference %.2e\n", DataTypeName(type), difference);
    EXPECT_LE(difference, tolerance) << DataTypeName(type);
  }
}

// Over 30 steps 16-bit training lowers the loss as float32 training does. At learning rate 0.02 float32
// training of this net descends steadily (at 0.1 its loss jumps after 25 steps, where runs that differ by
// rounding part ways); an H100 ended 16-bit runs within 0.6% of float32's loss.
TEST(CudaTraining, MixedPrecisionTrains) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  Job float32;
  float32.learning_rate = 0.02f;
  const std::vector<float> float_losses = Train(float32, 30).second;
  for (DataType type : {DataType::kFloat16, DataType::kBFloat16}) {
    Job run = float32;
    run.compute = type;
    const std::vector<float> losses = Train(run, 30).second;
    std::printf("%s losses (float32 in parentheses):", DataTypeName(type));
    for (size_t i = 0; i < losses.size(); i += 5) std::printf(" %.4f (%.4f)", losses[i], float_losses[i]);
    std::printf(" ... %.4f (%.4f)\n", losses.back(), float_losses.back());
    EXPECT_LT(losses.back(), 0.9 * losses.front()) << DataTypeName(type) << " training lowers the loss";
    EXPECT_NEAR(losses.back(), float_losses.back(), 0.02 * float_losses.back()) << DataTypeName(type);
  }
}

}  // namespace
}  // namespace lockstep::testing
