// The memory plan: sizes from the shape functions, shared buffers that change no result bit on one and two
// devices, a prediction close to the memory a step allocates, and the trainer's report and limit.
#include <gtest/gtest.h>

#include <numeric>
#include <regex>

#include "lockstep/core/net.h"
#include "lockstep/data/batch_reader.h"
#include "lockstep/model/layers.h"
#include "lockstep/model/optimizer.h"
#include "lockstep/model/zoo.h"
#include "lockstep/ops/dnnl_utils.h"
#include "lockstep/parallel/data_parallel.h"
#include "lockstep/train/trainer.h"
#include "shards.h"
#include "synthetic_lenet.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

struct Job {
  std::string model;  // lenet (1x28x28) or resnet18 (3x32x32)
  int devices;
  bool share_buffers;
  bool input_shapes = true;
  bool fuse_relus = true;
};

struct Trained {
  std::vector<float> losses;
  std::map<std::string, std::vector<float>> state;  // every device's float state
  size_t allocated_bytes = 0;                       // tensors, and the operators' scratch pools
  size_t scratch_bytes = 0;                         // the pools alone
  MemoryPlan plan;
  int recomputed = 0;  // activations the backward pass computes again (parallel/recompute.h)
  int fused = 0;       // ops with a ReLU folded in (parallel/fuse_relu.h)
};

constexpr int kBatchPerDevice = 4;

Trained Train(const Job& job, int steps) {
  const bool lenet = job.model == "lenet";
  const int channels = lenet ? 1 : 3, size = lenet ? 28 : 32;
  ParallelOptions o;
  o.devices.resize(job.devices);
  std::iota(o.devices.begin(), o.devices.end(), 0);
  o.threads_per_device = 1;
  o.max_threads = 2;
  o.share_buffers = job.share_buffers;
  o.fuse_relus = job.fuse_relus;
  if (job.input_shapes)
    o.input_shapes = {{"data", {{kBatchPerDevice, channels, size, size}, DataType::kFloat}},
                      {"label", {{kBatchPerDevice}, DataType::kInt32}}};
  o.input_builder = [](ModelHelper& model) { layers::ReadBatch(model, "reader", "data", "label"); };
  o.forward_builder = [&](ModelHelper& model, float loss_scale) {
    std::string logits = BuildModel(job.model, model, model.Scoped("data"), {channels, size, 10, false});
    auto [softmax, loss] = layers::SoftmaxWithLoss(model, logits, model.Scoped("label"), "softmax", "loss");
    return std::vector<std::string>{layers::Scale(model, loss, "scaled_loss", loss_scale)};
  };
  o.param_update_builder = [](ModelHelper& model) { AddMomentumSgd(model, SgdOptions{}); };
  ModelHelper model("train");
  DataParallelModel dp = Parallelize(model, o);
  for (int i = 0; i < model.param_init_net().op_size(); ++i)
    model.param_init_net().mutable_op(i)->mutable_device_option()->set_random_seed(11 + i);
  const size_t pools_before = ScratchPoolBytes();  // other threads' (this one's, from earlier tests)
  Workspace ws;
  auto source = std::make_shared<SyntheticSource>(channels, size, 10, /*seed=*/5);
  ws.SetObject("reader", std::make_shared<BatchReader>(source, kBatchPerDevice, job.devices));
  ws.RunNetOnce(model.param_init_net());
  Net* net = ws.CreateNet(model.net());
  Trained run;
  for (int step = 0; step < steps; ++step) {
    net->Run();
    for (const auto& loss : dp.losses) run.losses.push_back(ws.Blob(loss).data<float>()[0]);
  }
  for (const auto& scope : dp.scopes)
    for (const auto& name : dp.state_blobs)
      if (ws.Blob(scope + name).dtype() == DataType::kFloat)
        run.state[scope + name] = Values(ws.Blob(scope + name));
  run.scratch_bytes = ScratchPoolBytes() - pools_before;  // the net's threads and their pools are alive
  run.allocated_bytes = ws.AllocatedBytes() + run.scratch_bytes;
  run.plan = dp.memory_plan;
  for (const auto& op : model.net().op()) {
    if (op.type() == "SpatialBNReluAgain") ++run.recomputed;
    const bool fused_producer = (op.type() == "Add" || op.type() == "Conv") && IntArg(op, "relu") != 0;
    if (fused_producer || op.type() == "SumReluGradient" || op.type() == "AveragePoolReluGradient")
      ++run.fused;
  }
  return run;
}

// Shared buffers give the same bits as a buffer per blob, in less memory, and the plan predicts the memory
// a step allocates within 5%.
void ExpectSameBitsInLessMemory(const std::string& model, int devices) {
  constexpr double kTolerance = 0.05;
  SCOPED_TRACE(fmt::format("{} on {} devices", model, devices));
  const Trained unshared = Train({model, devices, false}, 3);
  const Trained shared = Train({model, devices, true}, 3);
  EXPECT_EQ(shared.losses, unshared.losses);
  ASSERT_EQ(shared.state.size(), unshared.state.size());
  for (const auto& [name, values] : unshared.state) EXPECT_EQ(shared.state.at(name), values) << name;
  EXPECT_LT(shared.allocated_bytes, unshared.allocated_bytes);
  EXPECT_EQ(unshared.recomputed, 0);
  if (model == "resnet18") EXPECT_EQ(shared.recomputed, 9 * devices);  // the stem and each of the 8 blocks
  ASSERT_TRUE(shared.plan.unknown.empty()) << shared.plan.unknown;
  EXPECT_NEAR(double(shared.plan.Total()), double(shared.allocated_bytes),
              kTolerance * shared.allocated_bytes);
  EXPECT_NEAR(double(unshared.plan.Total()), double(unshared.allocated_bytes),
              kTolerance * unshared.allocated_bytes);
  ASSERT_EQ(shared.plan.devices.size(), static_cast<size_t>(devices));
  const MemoryUse& use = shared.plan.devices.begin()->second;
  EXPECT_GT(use.gradients, 0u);
  EXPECT_LE(use.gradients, use.parameters);  // one per trainable parameter, never shared
  EXPECT_LT(use.activations, use.unshared_activations * 3 / 4);
  // The scratch the plan counts is what every run needs; the pools also hold the reorders at layout
  // boundaries, which depend on the kernels oneDNN picks next to each other (measured: 2.5% of LeNet's pools
  // with AVX-512, 3.2% with AVX2; 0.1% of ResNet-18's with either).
  size_t planned_scratch = 0;
  for (const auto& [device, use] : shared.plan.devices) planned_scratch += use.scratch;
  EXPECT_LE(planned_scratch, shared.scratch_bytes);
  EXPECT_GE(planned_scratch, shared.scratch_bytes * 0.9);
  std::printf(
      "%s, %d devices: allocated %zu bytes shared, %zu unshared; planned %zu and %zu; scratch %zu, "
      "planned %zu\n",
      model.c_str(), devices, shared.allocated_bytes, unshared.allocated_bytes, shared.plan.Total(),
      unshared.plan.Total(), shared.scratch_bytes, planned_scratch);
}

TEST(MemoryPlan, LeNetSharesBuffersWithTheSameBits) {
  ExpectSameBitsInLessMemory("lenet", 1);
  ExpectSameBitsInLessMemory("lenet", 2);
}

TEST(MemoryPlan, ResNet18SharesBuffersWithTheSameBits) {
  ExpectSameBitsInLessMemory("resnet18", 1);
  ExpectSameBitsInLessMemory("resnet18", 2);
}

// ReLUs folded into LeNet's convolutions and pools' gradients, and into ResNet's residual Adds, gradient Sums
// and final pool's gradient, change no bit of training.
TEST(FuseRelu, TrainingGivesTheSameBits) {
  for (const auto& [model, pairs] : {std::pair<std::string, int>{"lenet", 4}, {"resnet18", 16}}) {
    for (int devices : {1, 2}) {
      SCOPED_TRACE(fmt::format("{} on {} devices", model, devices));
      Job job{model, devices, true};
      const Trained fused = Train(job, 3);
      job.fuse_relus = false;
      const Trained separate = Train(job, 3);
      // LeNet's two convolutions and two pools; ResNet-18's 8 blocks' ends, the inputs of the 7 after the
      // first, and its global pool.
      EXPECT_EQ(fused.fused, pairs * devices);
      EXPECT_EQ(separate.fused, 0);
      EXPECT_EQ(fused.losses, separate.losses);
      ASSERT_EQ(fused.state.size(), separate.state.size());
      for (const auto& [name, values] : separate.state) EXPECT_EQ(fused.state.at(name), values) << name;
    }
  }
}

// An evaluation net built with the training net's layer names and planned too, run between training steps
// in the same workspace (as the trainer does): training and its results are those without sharing.
TEST(MemoryPlan, AnEvaluationNetWithTheSameNamesDoesNotDisturbTraining) {
  auto run = [](bool share) {
    ParallelOptions o;
    o.devices = {0};
    o.threads_per_device = 1;
    o.max_threads = 2;
    o.share_buffers = share;
    o.input_shapes = {{"data", {{kBatchPerDevice, 1, 28, 28}, DataType::kFloat}},
                      {"label", {{kBatchPerDevice}, DataType::kInt32}}};
    o.input_builder = [](ModelHelper& model) { layers::ReadBatch(model, "reader", "data", "label"); };
    o.forward_builder = [](ModelHelper& model, float loss_scale) {
      std::string logits = BuildModel("lenet", model, model.Scoped("data"), {1, 28, 28, false});
      auto [softmax, loss] = layers::SoftmaxWithLoss(model, logits, model.Scoped("label"), "softmax", "loss");
      return std::vector<std::string>{layers::Scale(model, loss, "scaled_loss", loss_scale)};
    };
    o.param_update_builder = [](ModelHelper& model) { AddMomentumSgd(model, SgdOptions{}); };
    ModelHelper train("train"), test("test");
    DataParallelModel dp = Parallelize(train, o);
    std::string logits;
    {
      ModelHelper::NameScope scope(test, dp.scopes[0]);
      logits = BuildModel("lenet", test, test.Scoped("test_data"), {1, 28, 28, true});
    }
    MemoryPlanOptions plan;  // the evaluation net planned too, as the trainer plans its own
    plan.share = share;
    plan.scopes = dp.scopes;
    plan.keep = {logits};
    plan.given[dp.scopes[0] + "test_data"] = {{kBatchPerDevice, 1, 28, 28}};
    PlanMemory(&test.net(), train.param_init_net(), plan);
    Workspace ws;
    auto source = std::make_shared<SyntheticSource>(1, 28, 10, /*seed=*/5);
    ws.SetObject("reader", std::make_shared<BatchReader>(source, kBatchPerDevice, 1));
    ws.RunNetOnce(train.param_init_net());
    ws.CreateBlob(dp.scopes[0] + "test_data")->CopyFrom(RandomTensor({kBatchPerDevice, 1, 28, 28}, 9));
    Net* train_net = ws.CreateNet(train.net());
    Net* test_net = ws.CreateNet(test.net());
    std::vector<float> values;
    for (int step = 0; step < 3; ++step) {
      train_net->Run();
      values.push_back(ws.Blob(dp.losses[0]).data<float>()[0]);
      test_net->Run();
      for (float v : Values(ws.Blob(logits))) values.push_back(v);
    }
    return values;
  };
  EXPECT_EQ(run(true), run(false));
}

// Without the readers' shapes the plan has no sizes and says why; buffers are still shared, bit for bit.
TEST(MemoryPlan, WithoutInputShapesBuffersShareUnsized) {
  Job job{"lenet", 1, true, false};
  const Trained shared = Train(job, 2);
  EXPECT_NE(shared.plan.unknown.find("ReadBatch"), std::string::npos) << shared.plan.unknown;
  job.share_buffers = false;
  const Trained unshared = Train(job, 2);
  EXPECT_EQ(shared.losses, unshared.losses);
  EXPECT_LT(shared.allocated_bytes, unshared.allocated_bytes);
}

// One epoch of one batch of 64, no checkpoint.
TrainerConfig NullLeNet(const std::string& dir) {
  TrainerConfig config = SyntheticLeNet(dir);
  config.batch_size = 64;
  config.epoch_size = 64;
  config.num_epochs = 1;
  config.save_model_name = "";
  return config;
}

// --plan_memory plans and stops: no log, no checkpoint folder content.
// A CUDA device's convolutions share one cuDNN workspace, which grows to the largest limit: the plan counts
// that; a CPU device's scratch pools hold a filter's copy in the kernel's layout per slot, the largest.
TEST(MemoryPlan, OperatorScratchIsTheLargestRequestPerDevice) {
  NetDef init, net;
  for (const char* device : {"cpu", "gpu"})
    for (int64_t filters : {16, 32}) {
      const std::string prefix = fmt::format("{}_{}/", device, filters);
      OperatorDef fill = MakeOperatorDef("ConstantFill", {}, {prefix + "w"},
                                         {Arg("shape", std::vector<int64_t>{filters, 16, 3, 3})});
      OperatorDef conv = MakeOperatorDef("Conv", {prefix + "x", prefix + "w"}, {prefix + "y"},
                                         {Arg("kernel", int64_t{3}), Arg("ws_nbytes_limit", filters << 20)});
      const Device on{device == std::string("cpu") ? DeviceType::kCpu : DeviceType::kCuda, 0};
      SetDevice(&fill, on);
      SetDevice(&conv, on);
      *init.add_op() = fill;
      *net.add_op() = conv;
    }
  MemoryPlanOptions options;
  options.share = false;
  for (const char* device : {"cpu", "gpu"})
    for (int filters : {16, 32})
      options.given[fmt::format("{}_{}/x", device, filters)] = {{2, 16, 8, 8}, DataType::kFloat};
  const MemoryPlan plan = PlanMemory(&net, init, options);
  ASSERT_TRUE(plan.unknown.empty()) << plan.unknown;
  EXPECT_EQ(plan.devices.at("gpu:0").scratch, size_t{32} << 20);
  // The 32 x 16 x 3 x 3 filter in the blocked layout of the kernel (16 and 32 channels fill whole blocks).
  EXPECT_EQ(plan.devices.at("cpu:0").scratch, size_t{32 * 16 * 9 * 4});
}

TEST(MemoryPlan, PlanMemoryTrainsNothing) {
  TempDirectory dir;
  TrainerConfig config = NullLeNet(dir / "run");
  config.plan_memory = true;
  TrainerResult result = lockstep::Train(config);
  EXPECT_TRUE(result.log_path.empty());
  EXPECT_FALSE(std::filesystem::exists(dir / "run"));
}

// A run that saves checkpoints writes each from a copy of one replica's state, which the host budget holds:
// LeNet's 129,068 parameters and as many momentum values (and the iteration counter), 1008 KiB.
TEST(MemoryPlan, ACheckpointCopyIsPlannedWhenCheckpointsAreSaved) {
  TempDirectory dir;
  for (int devices : {1, 2})
    for (const char* save : {"", "m"}) {
      SCOPED_TRACE(fmt::format("{} devices, --save_model_name '{}'", devices, save));
      TrainerConfig config = NullLeNet(dir / "run");
      config.plan_memory = true;
      config.num_devices = devices;
      config.save_model_name = save;
      ::testing::internal::CaptureStdout();
      lockstep::Train(config);
      const std::string output = ::testing::internal::GetCapturedStdout();
      ASSERT_NE(output.find("memory plan: peak "), std::string::npos) << output;
      EXPECT_EQ(output.find(" + checkpoint copy 1008 KiB + ") != std::string::npos, *save != '\0') << output;
    }
}

// The largest --batch_size that --plan_memory names for `config` (with a 16 GiB limit), or -1 for none.
int64_t PlannedLargestBatch(TrainerConfig config) {
  config.plan_memory = true;
  config.memory_limit_gb = 16;
  ::testing::internal::CaptureStdout();
  lockstep::Train(config);
  const std::string output = ::testing::internal::GetCapturedStdout();
  const std::string line = "largest --batch_size within the limits: ";
  const size_t at = output.find(line);
  return at == std::string::npos ? -1 : std::stoll(output.substr(at + line.size()));
}

// Planned, not trained: whether the plan of `config` at `batch` (a multiple of `step`) fits 16 GiB.
bool FitsAt(TrainerConfig config, int64_t batch, int64_t step) {
  config.plan_memory = true;
  config.memory_limit_gb = 16;
  config.batch_size = static_cast<int>(batch / step * step);
  config.epoch_size = config.batch_size;
  ::testing::internal::CaptureStdout();
  bool fitted = true;
  try {
    lockstep::Train(config);
  } catch (const InvalidInput&) {
    fitted = false;
  }
  ::testing::internal::GetCapturedStdout();
  return fitted;
}

// --plan_memory names the largest batch within the limit: one that fits, larger than a batch that fits. The
// memory in use moves a little between plans (an allocator may keep what was freed): checked 10% either side.
TEST(MemoryPlan, PlanMemoryNamesTheLargestBatchThatFits) {
  TempDirectory dir;
  TrainerConfig config = NullLeNet(dir.path());
  const int64_t largest = PlannedLargestBatch(config);
  EXPECT_GT(largest, config.batch_size);
  EXPECT_TRUE(FitsAt(config, largest * 9 / 10, 1));
  EXPECT_FALSE(FitsAt(config, largest * 11 / 10, 1));
}

// Micro-batches are planned too: their limit holds, and the largest batch splits into them. (Memory grows
// faster than the plans at a small batch and twice it say: the largest batch is found with plans near it.)
TEST(MemoryPlan, MicroBatchesArePlannedAndLimited) {
  TempDirectory dir;
  TrainerConfig config = NullLeNet(dir.path());
  config.micro_batches = 3;
  config.batch_size = 12;
  const int64_t largest = PlannedLargestBatch(config);
  EXPECT_GT(largest, 0);
  EXPECT_EQ(largest % 3, 0) << largest;
  EXPECT_TRUE(FitsAt(config, largest * 9 / 10, 3));
  EXPECT_FALSE(FitsAt(config, largest * 11 / 10, 3));
  config.plan_memory = true;
  config.memory_limit_gb = 0.001;
  EXPECT_THROW(lockstep::Train(config), InvalidInput);
}

// With --test_data the plan adds the evaluation net's activations, whose buffers stay beside the training
// net's, to each device.
TEST(MemoryPlan, WithTestDataThePlanCountsTheEvaluationNet) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  TempDirectory dir;
  TrainerConfig config = NullLeNet(dir.path());
  config.train_data = "fashion-mnist";
  config.plan_memory = true;
  auto planned = [&](std::string* output) {
    ::testing::internal::CaptureStdout();
    lockstep::Train(config);
    *output = ::testing::internal::GetCapturedStdout();
    std::smatch kib;
    const std::regex tensors("tensors ([0-9.]+) (KiB|MiB)");
    EXPECT_TRUE(std::regex_search(*output, kib, tensors)) << *output;
    return std::stod(kib[1]) * (kib[2] == "MiB" ? 1024 : 1);
  };
  std::string without_output, with_output;
  const double without = planned(&without_output);
  EXPECT_EQ(without_output.find("evaluation"), std::string::npos) << without_output;
  config.test_data = "fashion-mnist";
  const double with = planned(&with_output);
  EXPECT_NE(with_output.find(", evaluation "), std::string::npos) << with_output;
  EXPECT_GT(with, without);
}

// A plan above --memory_limit_gb stops before the first step and names the batch size that fits.
TEST(MemoryPlan, PlanAboveTheLimitStopsBeforeTheFirstStep) {
  TempDirectory dir;
  TrainerConfig config = NullLeNet(dir.path());
  config.memory_limit_gb = 1e-3;  // 1 MiB: less than the process already uses
  try {
    lockstep::Train(config);
    FAIL() << "expected the plan to be refused";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("the memory plan needs"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--memory_limit_gb"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "lenet_gpu1_b64_L10_lr0.10_v2.log"));
}

}  // namespace
}  // namespace lockstep::testing
