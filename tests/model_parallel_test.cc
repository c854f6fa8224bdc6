// Model parallelism: layers placed on several CPU devices get a Copy at every boundary (forward and
// backward); split over 2 and 3 devices, with and without pipelined micro-batches, and combined with data
// parallelism, a network trains to the same parameters as on one device; bad placements fail clearly.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "lockstep/data/batch_reader.h"
#include "lockstep/model/layers.h"
#include "lockstep/model/optimizer.h"
#include "lockstep/model/zoo.h"
#include "lockstep/parallel/data_parallel.h"
#include "lockstep/parallel/micro_batches.h"
#include "lockstep/parallel/placement.h"
#include "small_conv_net.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

constexpr int kBatch = 12;
Device Cpu(int id) { return {DeviceType::kCpu, id}; }

struct Split {
  int replicas = 1;
  int stages = 1;
  int micro_batches = 1;
  // How the stages are placed: by layer name (2 stages: from conv2; 3 stages: from conv2 and fc1), or by
  // balanced cost.
  bool balanced = false;
};

ParallelOptions SplitOptions(const Split& split) {
  ParallelOptions o;
  o.devices.resize(split.replicas * split.stages);
  std::iota(o.devices.begin(), o.devices.end(), 0);
  o.devices_per_replica = split.stages;
  o.micro_batches = split.micro_batches;
  o.share_buffers = false;  // the tests look for blobs by name; tests/memory_plan_test.cc covers sharing
  o.threads_per_device = 1;
  o.max_threads = 2;
  o.input_builder = [](ModelHelper& model) { layers::ReadBatch(model, "reader", "data", "label"); };
  o.forward_builder = [split](ModelHelper& model, float loss_scale) {
    const int first = model.net().op_size();
    std::string logits = BuildConvNet(model, model.Scoped("data"));
    auto [softmax, loss] = layers::SoftmaxWithLoss(model, logits, model.Scoped("label"), "softmax", "loss");
    auto scaled = layers::Scale(model, loss, "scaled_loss", loss_scale);
    const auto& devices = model.replica().devices;
    if (split.stages > 1 && split.balanced) {
      auto starts = BalancedStageStarts(model, first, split.stages,
                                        {{model.Scoped("data"), {{kBatch, 1, 8, 8}}},
                                         {model.Scoped("label"), {{kBatch}, DataType::kInt32}}});
      PlaceStages(model, starts, devices);
    } else if (split.stages > 1) {
      std::vector<std::pair<std::string, Device>> from_layer = {{"conv2", devices[1]}};
      if (split.stages > 2) from_layer.push_back({"fc1", devices[2]});
      PlaceLayers(model, from_layer, devices);
    }
    return std::vector<std::string>{scaled};
  };
  o.param_update_builder = [](ModelHelper& model) {
    SgdOptions sgd;
    sgd.base_learning_rate = 0.1f;
    sgd.momentum = 0.9f;
    sgd.weight_decay = 1e-3f;
    AddMomentumSgd(model, sgd);
  };
  return o;
}

// Replica 0's float state after `steps` steps.
std::map<std::string, std::vector<float>> Train(const Split& split, int steps, NetDef* net = nullptr) {
  ModelHelper model("split");
  DataParallelModel dp = Parallelize(model, SplitOptions(split));
  if (net) *net = model.net();
  Workspace ws;
  auto source = std::make_shared<SyntheticSource>(1, 8, 5, /*seed=*/7);
  ws.SetObject("reader", std::make_shared<BatchReader>(source, kBatch / split.replicas, split.replicas));
  ws.RunNetOnce(model.param_init_net());
  Net* train = ws.CreateNet(model.net());
  for (int step = 0; step < steps; ++step) train->Run();
  std::map<std::string, std::vector<float>> state;
  for (const auto& name : dp.state_blobs)
    if (ws.Blob(dp.scopes[0] + name).dtype() == DataType::kFloat)
      state[name] = Values(ws.Blob(dp.scopes[0] + name));
  return state;
}

void ExpectSameAsOneDevice(const Split& split) {
  static const auto one = Train({}, 20);
  auto trained = Train(split, 20);
  ASSERT_EQ(trained.size(), one.size());
  double worst = 0;
  for (const auto& [name, values] : one) {
    double difference = RelativeDifference(trained.at(name), values);
    EXPECT_LE(difference, 1e-5) << name;
    worst = std::max(worst, difference);
  }
  std::printf(
      "%d replicas x %d stages, %d micro-batches vs 1 device after 20 steps: largest relative "
      "difference %.2e\n",
      split.replicas, split.stages, split.micro_batches, worst);
  EXPECT_GT(RelativeDifference(Train({}, 0).at("conv1_w"), one.at("conv1_w")), 1e-3) << "the net trains";
}

int CountOps(const NetDef& net, const std::string& type) {
  return static_cast<int>(std::count_if(net.op().begin(), net.op().end(),
                                        [&](const OperatorDef& op) { return op.type() == type; }));
}

}  // namespace

TEST(ModelParallel, TwoStagesTrainLikeOneDevice) { ExpectSameAsOneDevice({1, 2, 1}); }
TEST(ModelParallel, ThreeStagesTrainLikeOneDevice) { ExpectSameAsOneDevice({1, 3, 1}); }
TEST(ModelParallel, TwoStagesWithMicroBatchesTrainLikeOneDevice) { ExpectSameAsOneDevice({1, 2, 4}); }
TEST(ModelParallel, ThreeBalancedStagesWithMicroBatchesTrainLikeOneDevice) {
  ExpectSameAsOneDevice({1, 3, 3, /*balanced=*/true});
}
TEST(ModelParallel, MicroBatchesOnOneDeviceTrainLikeTheWholeBatch) { ExpectSameAsOneDevice({1, 1, 4}); }
TEST(ModelParallel, ReplicasOfTwoStagesTrainLikeOneDevice) { ExpectSameAsOneDevice({2, 2, 2}); }

TEST(ModelParallel, CopiesSitAtEveryBoundaryForwardAndBackward) {
  NetDef net;
  Train({1, 2, 1}, 0, &net);
  // Forward: pool1 goes to device 1. Backward: the gradient of pool1 comes back to device 0. The update:
  // device 1's parameters read the learning rate made on device 0.
  std::map<std::string, const OperatorDef*> copies;
  for (const auto& op : net.op())
    if (op.type() == "Copy") copies[op.output(0)] = &op;
  ASSERT_TRUE(copies.count("cpu_0/pool1@cpu:1"));
  EXPECT_FALSE(copies.at("cpu_0/pool1@cpu:1")->is_gradient_op());
  EXPECT_EQ(DeviceOf(*copies.at("cpu_0/pool1@cpu:1")), Cpu(1));
  ASSERT_TRUE(copies.count("cpu_0/pool1_grad@cpu:0"));
  EXPECT_TRUE(copies.at("cpu_0/pool1_grad@cpu:0")->is_gradient_op());
  EXPECT_EQ(DeviceOf(*copies.at("cpu_0/pool1_grad@cpu:0")), Cpu(0));
  EXPECT_TRUE(copies.count("cpu_0/label@cpu:1"));
  EXPECT_TRUE(copies.count("cpu_0/lr@cpu:1"));
  EXPECT_EQ(copies.size(), 4u);
  for (const auto& op : net.op())
    for (const auto& blob : op.input())
      if (blob.find("conv2_w") != std::string::npos || blob.find("fc2_w") != std::string::npos)
        EXPECT_EQ(DeviceOf(op), Cpu(1)) << DescribeOperator(op);
  EXPECT_NO_THROW(CheckPlacement(net, NetDef()));
}

TEST(ModelParallel, DeviceScopePlacesLayersAndTheirParameters) {
  // The Torch seed's way: each block is built under the scope of its device.
  ModelHelper model("scoped");
  std::string x;
  {
    ModelHelper::DeviceScope scope(model, Cpu(0));
    x = layers::Relu(model, layers::Conv(model, "data", "conv1", 1, 4, 3, {}), "relu1");
  }
  {
    ModelHelper::DeviceScope scope(model, Cpu(1));
    x = layers::Relu(model, layers::Conv(model, x, "conv2", 4, 4, 3, {}), "relu2");
  }
  EXPECT_EQ(model.Param("conv1_w").device, Cpu(0));
  EXPECT_EQ(model.Param("conv2_w").device, Cpu(1));
  EXPECT_THROW(CheckPlacement(model.net(), model.param_init_net()), InvalidInput);
  EXPECT_EQ(InsertCopies(&model.net(), model.param_init_net()), 1);
  EXPECT_EQ(model.net().op(2).type(), "Copy");
  EXPECT_EQ(model.net().op(2).output(0), "relu1@cpu:1");
  CheckPlacement(model.net(), model.param_init_net());
  EXPECT_EQ(InsertCopies(&model.net(), model.param_init_net()), 0) << "a placed net needs no more copies";
}

TEST(ModelParallel, AResidualConnectionAcrossStagesSumsItsGradientWhereItIsRead) {
  // relu1 feeds conv2 and the Add of the next stage: its two partial gradients are summed on device 1 and
  // the sum is copied back once.
  auto gradients = [](bool split, NetDef* placed) {
    ModelHelper model("residual");
    layers::ConvOptions conv;
    conv.pad = 1;
    std::string x = layers::Relu(model, layers::Conv(model, "data", "conv1", 1, 4, 3, conv), "relu1");
    ModelHelper::DeviceScope scope(model, Cpu(split ? 1 : 0));
    std::string y = layers::Add(model, layers::Conv(model, x, "conv2", 4, 4, 3, conv), x, "sum");
    std::string logits = layers::FC(model, y, "fc", 4 * 8 * 8, 5);
    auto [softmax, loss] = layers::SoftmaxWithLoss(model, logits, "label", "softmax", "loss");
    model.AddGradientOperators({loss});
    InsertCopies(&model.net(), model.param_init_net());
    CheckPlacement(model.net(), model.param_init_net());
    Workspace ws;
    ws.RunNetOnce(model.param_init_net());
    Feed(&ws, "data", RandomTensor({4, 1, 8, 8}, 3));
    Feed(&ws, "label", Int32Tensor({4}, {0, 1, 2, 3}));
    ws.RunNetOnce(model.net());
    *placed = model.net();
    std::map<std::string, std::vector<float>> values;
    for (const auto& [param, grad] : model.param_to_grad()) values[param] = Values(ws.Blob(grad));
    return values;
  };
  NetDef one_net, split_net;
  auto one = gradients(false, &one_net), split = gradients(true, &split_net);
  ASSERT_EQ(split.size(), 6u);
  for (const auto& [param, values] : one)
    EXPECT_LE(RelativeDifference(split.at(param), values), 1e-6) << param;
  for (const auto& op : split_net.op())
    if (op.type() == "Sum") EXPECT_EQ(DeviceOf(op), Cpu(1)) << DescribeOperator(op);
  EXPECT_EQ(CountOps(split_net, "Copy"), 2) << "relu1 forward, its summed gradient backward";
}

TEST(ModelParallel, AnOpReadingTwoDevicesWithoutACopyIsRefused) {
  NetDef net;
  auto add = [&](const std::string& type, std::vector<std::string> in, std::vector<std::string> out, int id) {
    auto* op = net.add_op();
    *op = MakeOperatorDef(type, in, out, {Arg("shape", std::vector<int64_t>{2})});
    SetDevice(op, Cpu(id));
  };
  add("ConstantFill", {}, {"a"}, 0);
  add("ConstantFill", {}, {"b"}, 1);
  add("Add", {"a", "b"}, {"c"}, 1);
  try {
    CheckPlacement(net, NetDef());
    ADD_FAILURE() << "no error";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("runs on cpu:1 but reads 'a', which lives on cpu:0"),
              std::string::npos)
        << e.what();
  }
}

TEST(ModelParallel, AnInPlaceUpdateOfABlobOnAnotherDeviceIsRefused) {
  NetDef net;
  auto* fill = net.add_op();
  *fill = MakeOperatorDef("ConstantFill", {}, {"a"}, {Arg("shape", std::vector<int64_t>{2})});
  auto* relu = net.add_op();
  *relu = MakeOperatorDef("Relu", {"a"}, {"a"});
  SetDevice(relu, Cpu(1));
  EXPECT_THROW(InsertCopies(&net, NetDef()), InvalidInput);
}

TEST(ModelParallel, BadPlacementsFailClearly) {
  auto expect_error = [](const std::function<void(ModelHelper&)>& place, const std::string& message) {
    ModelHelper model("bad");
    BuildConvNet(model, "data");
    try {
      place(model);
      ADD_FAILURE() << "no error; expected: " << message;
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  const std::vector<Device> two = {Cpu(0), Cpu(1)};
  expect_error(
      [&](ModelHelper& m) {
        PlaceLayers(m, {{"conv2", Cpu(5)}}, two);
      },
      "layer 'conv2' is placed on cpu:5, which does not exist; the devices are cpu:0, cpu:1");
  expect_error([&](ModelHelper& m) { PlaceLayers(m, {{"conv9", Cpu(1)}}, two); }, "has no layer 'conv9'");
  expect_error(
      [&](ModelHelper& m) {
        BalancedStageStarts(m, 0, 9, {{"data", {{2, 1, 8, 8}}}});
      },
      "cannot split the 8 layers (operators) of model 'bad' into 9 stages");
  expect_error(
      [&](ModelHelper& m) {
        BalancedStageStarts(m, 0, 0, {{"data", {{2, 1, 8, 8}}}});
      },
      "into 0 stages");
}

TEST(ModelParallel, BalancedStagesOfResNet50HaveSimilarCost) {
  ModelHelper model("resnet50");
  ModelConfig config;
  config.image_size = 64;
  BuildModel("resnet50", model, "data", config);
  auto starts = BalancedStageStarts(model, 0, 2, {{"data", {{4, 3, 64, 64}}}});
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_EQ(starts[0], 0);
  // The cut is inside the network, well away from either end (the early stages are wide, the late deep).
  EXPECT_GT(starts[1], model.net().op_size() / 5);
  EXPECT_LT(starts[1], model.net().op_size() * 4 / 5);
}

TEST(ModelParallel, MicroBatchesCloneTheForwardPassAndShareParameters) {
  ModelHelper model("clones");
  model.AddOp("ConstantFill", {}, {"data"}, {Arg("shape", std::vector<int64_t>{4, 1, 8, 8})});
  std::string logits = BuildConvNet(model, "data");
  auto losses = SplitIntoMicroBatches(&model.net(), 1, {"data"}, {logits}, 2, model.param_init_net());
  EXPECT_EQ(losses, (std::vector<std::string>{"fc2_mb0", "fc2_mb1"}));
  const NetDef& net = model.net();
  EXPECT_EQ(net.op(1).type(), "Split");
  EXPECT_EQ(net.op(1).output(1), "data_mb1");
  EXPECT_EQ(CountOps(net, "Conv"), 4);
  for (const auto& op : net.op())
    if (op.type() == "Conv") EXPECT_EQ(op.input(1).find("_mb"), std::string::npos) << "shared weights";
  EXPECT_THROW(SplitIntoMicroBatches(&model.net(), 1, {"data"}, {"nothing"}, 2, model.param_init_net()),
               InvalidInput);
}

}  // namespace lockstep::testing
