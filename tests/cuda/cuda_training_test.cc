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
};

// Replica 0's parameters (on the host) after `steps` steps of the small conv net, and the last loss.
std::pair<std::map<std::string, std::vector<float>>, float> Train(const Job& run, int steps) {
  ParallelOptions o;
  o.device_type = run.type;
  o.devices.resize(run.devices);
  std::iota(o.devices.begin(), o.devices.end(), 0);
  o.threads_per_device = 1;
  o.max_threads = 2;
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
    sgd.base_learning_rate = 0.1f;
    AddMomentumSgd(model, sgd);
  };
  ModelHelper model("train");
  DataParallelModel dp = Parallelize(model, o);
  Workspace ws;
  auto source = std::make_shared<SyntheticSource>(1, 8, 5, /*seed=*/3);
  ws.SetObject("reader", std::make_shared<BatchReader>(source, kBatch / run.devices, run.devices));
  ws.RunNetOnce(model.param_init_net());
  Net* net = ws.CreateNet(model.net());
  for (int step = 0; step < steps; ++step) net->Run();
  std::map<std::string, std::vector<float>> params;
  for (const auto& name : model.GetTrainableParams(dp.scopes[0])) {
    Tensor host;
    host.CopyFrom(ws.Blob(name));
    params[name.substr(dp.scopes[0].size())] = Values(host);
  }
  Tensor loss;
  loss.CopyFrom(ws.Blob(dp.scopes[0] + "loss"));
  return {params, loss.data<float>()[0]};
}

void ExpectClose(const std::map<std::string, std::vector<float>>& a,
                 const std::map<std::string, std::vector<float>>& b, double tolerance,
                 const std::string& what) {
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

TEST(CudaTraining, MixedPrecisionTrains) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  for (DataType type : {DataType::kFloat16, DataType::kBFloat16}) {
    Job run;
    run.compute = type;
    auto [first_params, first_loss] = Train(run, 1);
    auto [params, loss] = Train(run, 30);
    EXPECT_TRUE(std::isfinite(loss)) << DataTypeName(type);
    EXPECT_LT(loss, first_loss) << DataTypeName(type) << " training lowers the loss";
    // 16-bit compute follows the float32 run loosely (its rounding is 2^-8 to 2^-11 relative).
    ExpectClose(params, Train({}, 30).first, 5e-2, std::string(DataTypeName(type)) + " vs float32");
  }
}

}  // namespace
}  // namespace lockstep::testing
