// Parallelize: k devices x b/k per device train to the same parameters as one device x b; replicas stay
// identical; buckets, lanes and memonger keep results; bad setups fail before training.
#include "lockstep/parallel/data_parallel.h"

#include <omp.h>

#include <cmath>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>

#include "lockstep/comm/local_communicator.h"
#include "lockstep/core/operator.h"
#include "lockstep/data/batch_reader.h"
#include "lockstep/model/layers.h"
#include "lockstep/model/optimizer.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

constexpr int kBatch = 12;  // divides among 1, 2, 3 and 4 devices

struct SmallNet {
  bool bn = false;
  bool combine_spatial_bn = false;
  bool shared_model = false;
  bool share_buffers = true;
  size_t bucket_bytes = 8 << 20;
  int allreduce_channels = 1;
};

std::vector<int> Devices(int k) {
  std::vector<int> devices(k);
  std::iota(devices.begin(), devices.end(), 0);
  return devices;
}

// conv 3x3 (1 -> 4) [-> BN] -> relu -> max pool 2 -> FC (64 -> 5) -> softmax loss, on 8x8 images.
ParallelOptions SmallNetOptions(const SmallNet& net, int devices) {
  ParallelOptions o;
  o.devices = Devices(devices);
  o.combine_spatial_bn = net.combine_spatial_bn;
  o.shared_model = net.shared_model;
  o.share_buffers = net.share_buffers;
  o.bucket_bytes = net.bucket_bytes;
  o.allreduce_channels = net.allreduce_channels;
  o.threads_per_device = 1;
  o.max_threads = 2;
  o.input_builder = [](ModelHelper& model) { layers::ReadBatch(model, "reader", "data", "label"); };
  o.forward_builder = [net](ModelHelper& model, float loss_scale) {
    layers::ConvOptions conv;
    conv.pad = 1;
    conv.weight_init = FillSpec::Gaussian(0.3f);
    conv.bias = !net.bn;  // BN cancels a bias
    std::string x = layers::Conv(model, model.Scoped("data"), "conv", 1, 4, 3, conv);
    if (net.bn)
      x = layers::SpatialBN(model, x, "bn", 4, /*is_test=*/false, /*relu=*/true);
    else
      x = layers::Relu(model, x, "relu");
    x = layers::MaxPool(model, x, "pool", 2, 2);
    x = layers::FC(model, x, "fc", 4 * 4 * 4, 5, FillSpec::Gaussian(0.1f));
    auto [softmax, loss] = layers::SoftmaxWithLoss(model, x, model.Scoped("label"), "softmax", "loss");
    return std::vector<std::string>{layers::Scale(model, loss, "scaled_loss", loss_scale)};
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

struct Trained {
  std::vector<std::map<std::string, std::vector<float>>> state;  // per device: unscoped float state it has
  size_t allocated_bytes = 0;
  std::vector<float> losses;
  int views = 0;  // state blobs of later devices that are the first device's buffers
};

Trained TrainSmallNet(const SmallNet& net, int devices, int steps, bool seed_by_device = false) {
  ModelHelper model("small");
  DataParallelModel dp = Parallelize(model, SmallNetOptions(net, devices));
  if (seed_by_device)  // each fill its own seed, so each device draws its own initial values
    for (int i = 0; i < model.param_init_net().op_size(); ++i)
      model.param_init_net().mutable_op(i)->mutable_device_option()->set_random_seed(i);
  Workspace ws;
  auto source = std::make_shared<SyntheticSource>(1, 8, 5, /*seed=*/7);
  ws.SetObject("reader", std::make_shared<BatchReader>(source, kBatch / devices, devices));
  ws.RunNetOnce(model.param_init_net());
  Net* train = ws.CreateNet(model.net());
  Trained result;
  for (int step = 0; step < steps; ++step) {
    train->Run();
    float loss = 0;
    for (const auto& name : dp.losses) loss += ws.Blob(name).data<float>()[0];
    result.losses.push_back(loss);
  }
  for (const auto& scope : dp.scopes) {
    std::map<std::string, std::vector<float>> state;
    for (const auto& name : dp.state_blobs) {
      if (!ws.HasBlob(scope + name)) continue;
      const Tensor& blob = ws.Blob(scope + name);
      if (blob.dtype() == DataType::kFloat) state[name] = Values(blob);
      if (scope != dp.scopes[0] && blob.raw_data() == ws.Blob(dp.scopes[0] + name).raw_data()) ++result.views;
    }
    result.state.push_back(state);
  }
  result.allocated_bytes = ws.AllocatedBytes();
  return result;
}

void ExpectEquivalentToOneDevice(const SmallNet& net) {
  Trained one = TrainSmallNet(net, 1, 20);
  for (int k : {2, 3, 4}) {
    SCOPED_TRACE("devices = " + std::to_string(k));
    Trained many = TrainSmallNet(net, k, 20);
    for (int d = 1; d < k; ++d) EXPECT_EQ(many.state[d], many.state[0]) << "replica " << d << " drifted";
    ASSERT_EQ(many.state[0].size(), one.state[0].size());
    double worst = 0;
    for (const auto& [name, values] : one.state[0]) {
      double difference = RelativeDifference(many.state[0].at(name), values);
      EXPECT_LE(difference, 1e-5) << name;
      worst = std::max(worst, difference);
    }
    std::printf("%d devices vs 1 after 20 steps: largest relative difference %.2e\n", k, worst);
    EXPECT_NEAR(many.losses.back(), one.losses.back(), 1e-5 * std::abs(one.losses.back()));
  }
  EXPECT_LT(one.losses.back(), one.losses.front()) << "the net trains";
}

}  // namespace

TEST(DataParallel, DevicesTrainLikeOneDevice) { ExpectEquivalentToOneDevice({}); }

// shared_model: the same bits as equal copies, from one copy of the parameters (conv_w, bn_s, bn_b, fc_w,
// fc_b), of their momentum and of the iteration counter, which the second device names as views; BN's
// running statistics are each device's, the first's broadcast after each step.
TEST(DataParallel, SharedModelTrainsLikeEqualCopiesFromOneCopy) {
  SmallNet net;
  net.bn = true;
  const Trained copies = TrainSmallNet(net, 2, 20);
  net.shared_model = true;
  const Trained shared = TrainSmallNet(net, 2, 20);
  EXPECT_EQ(shared.losses, copies.losses);
  EXPECT_EQ(shared.state, copies.state);
  EXPECT_EQ(copies.views, 0);
  EXPECT_EQ(shared.views, 11);
  EXPECT_LT(shared.allocated_bytes, copies.allocated_bytes);
}

TEST(DataParallel, DevicesWithCombinedBatchNormTrainLikeOneDevice) {
  SmallNet net;
  net.bn = true;
  net.combine_spatial_bn = true;
  ExpectEquivalentToOneDevice(net);
  // A bucket per parameter: BN's parameter gradients are summed once the combined backward pass has read
  // each replica's own, so the buckets do not change the bits.
  const Trained one_bucket = TrainSmallNet(net, 2, 20);
  net.bucket_bytes = 0;
  EXPECT_EQ(TrainSmallNet(net, 2, 20).state, one_bucket.state);
}

TEST(DataParallel, PerDeviceBatchNormKeepsReplicasIdenticalButDiffers) {
  SmallNet net;
  net.bn = true;
  Trained one = TrainSmallNet(net, 1, 5);
  Trained two = TrainSmallNet(net, 2, 5);
  EXPECT_EQ(two.state[1].at("conv_w"), two.state[0].at("conv_w")) << "trained parameters stay identical";
  // Caffe2's broadcast_computed_params: the running statistics are the first device's on every device.
  EXPECT_EQ(two.state[1], two.state[0]);
  EXPECT_NE(two.state[0].at("bn_rm"), one.state[0].at("bn_rm")) << "the first device's half of each batch";
  EXPECT_GT(RelativeDifference(two.state[0].at("conv_w"), one.state[0].at("conv_w")), 1e-5)
      << "per-device statistics normalise each half on its own";
}

TEST(DataParallel, ReplicasStartFromDeviceZerosParameters) {
  // Every device draws its own initial values; the broadcast makes them equal.
  Trained two = TrainSmallNet({}, 2, 0, /*seed_by_device=*/true);
  EXPECT_EQ(two.state[1], two.state[0]);
}

TEST(DataParallel, WithoutAnUpdateBuilderOnlyTheForwardPassIsBuilt) {
  ParallelOptions o = SmallNetOptions({}, 2);
  o.param_update_builder = nullptr;
  ModelHelper model("forward");
  DataParallelModel dp = Parallelize(model, o);
  EXPECT_EQ(dp.scopes.size(), 2u);
  EXPECT_TRUE(model.param_to_grad().empty());
  for (const auto& op : model.net().op()) {
    EXPECT_EQ(op.type().find("Gradient"), std::string::npos) << op.type();
    EXPECT_NE(op.type(), "Allreduce");
    EXPECT_NE(op.type(), "MomentumSGDUpdate");
  }
  Workspace ws;
  auto source = std::make_shared<SyntheticSource>(1, 8, 5, /*seed=*/7);
  ws.SetObject("reader", std::make_shared<BatchReader>(source, kBatch / 2, 2));
  ws.RunNetOnce(model.param_init_net());
  ws.CreateNet(model.net())->Run();
  EXPECT_GT(ws.Blob("cpu_1/loss").data<float>()[0], 0.0f);
}

TEST(DataParallel, SmallBucketsAndSharedBuffersGiveTheSameResult) {
  SmallNet unshared;
  unshared.share_buffers = false;
  Trained plain = TrainSmallNet(unshared, 2, 5);
  SmallNet buckets;
  buckets.bucket_bytes = 1;
  Trained optimized = TrainSmallNet(buckets, 2, 5);
  EXPECT_EQ(optimized.losses, plain.losses);
  EXPECT_EQ(optimized.state, plain.state);
  EXPECT_LT(optimized.allocated_bytes, plain.allocated_bytes);
}

TEST(DataParallel, BucketsFollowReverseCreationOrderAndStartWhenTheirLastGradientIsReady) {
  ModelHelper model("small");
  SmallNet net;
  net.bucket_bytes = 1;  // one parameter per bucket
  DataParallelModel dp = Parallelize(model, SmallNetOptions(net, 2));
  ASSERT_EQ(dp.buckets.size(), 4u);
  std::vector<std::string> order;
  for (const auto& bucket : dp.buckets) order.push_back(bucket.params.at(0));
  EXPECT_EQ(order, (std::vector<std::string>{"fc_b", "fc_w", "conv_b", "conv_w"}));

  const NetDef& def = model.net();
  int allreduces = 0, first_allreduce = -1, last_gradient = -1;
  for (int i = 0; i < def.op_size(); ++i) {
    const auto& op = def.op(i);
    if (op.is_gradient_op()) last_gradient = i;
    if (op.type() != "Allreduce") continue;
    if (first_allreduce < 0) first_allreduce = i;
    ++allreduces;
    // Inputs: the communicator, the gradient on device 0, then on device 1; the last compute op before it
    // wrote one of them.
    ASSERT_EQ(op.input_size(), 3);
    EXPECT_EQ(op.input(1).substr(0, 6), "cpu_0/");
    EXPECT_EQ(op.input(2).substr(0, 6), "cpu_1/");
    int before = i - 1;
    while (def.op(before).type() == "Allreduce") --before;
    const auto& previous = def.op(before);
    bool wrote = false;
    for (const auto& out : previous.output()) wrote |= out == op.input(1) || out == op.input(2);
    EXPECT_TRUE(wrote) << DescribeOperator(op) << " follows " << DescribeOperator(previous);
  }
  EXPECT_EQ(allreduces, 4);
  EXPECT_LT(first_allreduce, last_gradient) << "the first bucket is reduced while backward goes on";
}

// Bucket i goes to channel i % 2: its own common world, made by its own CreateCommonWorld, and its own lane
// of the executor, chained only to the collectives of its channel. The sums do not change.
TEST(DataParallel, ChannelsTakeTheBucketsInTurnAndKeepTheResult) {
  SmallNet net;
  net.bucket_bytes = 1;  // one parameter per bucket: 4 buckets
  net.allreduce_channels = 2;
  ModelHelper model("small");
  Parallelize(model, SmallNetOptions(net, 2));
  std::vector<std::string> worlds;
  for (const auto& op : model.param_init_net().op())
    if (op.type() == "CreateCommonWorld") {
      worlds.push_back(op.output(0));
      EXPECT_EQ(GetIntArgument(op, "channel", 0), static_cast<int64_t>(worlds.size() - 1));
    }
  ASSERT_EQ(worlds, (std::vector<std::string>{"small/common_world", "small/common_world_channel1"}));
  std::vector<int> allreduces;
  for (int i = 0; i < model.net().op_size(); ++i)
    if (model.net().op(i).type() == "Allreduce") {
      EXPECT_EQ(model.net().op(i).input(0), worlds[allreduces.size() % 2]);
      allreduces.push_back(i);
    }
  ASSERT_EQ(allreduces.size(), 4u);

  Workspace ws;
  auto source = std::make_shared<SyntheticSource>(1, 8, 5, /*seed=*/7);
  ws.SetObject("reader", std::make_shared<BatchReader>(source, kBatch / 2, 2));
  ws.RunNetOnce(model.param_init_net());
  auto* dag = dynamic_cast<DagNet*>(ws.CreateNet(model.net()));
  ASSERT_NE(dag, nullptr);
  auto has_parent = [&](int child, int parent) {
    const auto& parents = dag->parents()[child];
    return std::find(parents.begin(), parents.end(), parent) != parents.end();
  };
  EXPECT_TRUE(has_parent(allreduces[2], allreduces[0])) << "channel 0 keeps its order";
  EXPECT_TRUE(has_parent(allreduces[3], allreduces[1])) << "channel 1 keeps its order";
  EXPECT_FALSE(has_parent(allreduces[1], allreduces[0])) << "the channels do not wait for each other";
  EXPECT_FALSE(has_parent(allreduces[3], allreduces[2]));

  SmallNet one_channel = net;
  one_channel.allreduce_channels = 1;
  Trained plain = TrainSmallNet(one_channel, 2, 5), channels = TrainSmallNet(net, 2, 5);
  EXPECT_EQ(channels.losses, plain.losses);
  EXPECT_EQ(channels.state, plain.state);
}

TEST(DataParallel, ATailBucketLimitMakesTheLastBucketSmall) {
  ParallelOptions o = SmallNetOptions({}, 2);
  o.tail_bucket_bytes = 1;
  ModelHelper model("small");
  DataParallelModel dp = Parallelize(model, o);
  ASSERT_EQ(dp.buckets.size(), 2u);
  EXPECT_EQ(dp.buckets[0].params, (std::vector<std::string>{"fc_b", "fc_w", "conv_b"}));
  EXPECT_EQ(dp.buckets[1].params, (std::vector<std::string>{"conv_w"})) << "the first layer's weights alone";
}

TEST(DataParallel, BucketsReportTheBuffersTheirAllreduceAllocates) {
  ModelHelper model("small");
  DataParallelModel dp = Parallelize(model, SmallNetOptions({}, 2));
  ASSERT_EQ(dp.buckets.size(), 1u);
  const GradientBucket& bucket = dp.buckets[0];
  EXPECT_EQ(bucket.params, (std::vector<std::string>{"fc_b", "fc_w", "conv_b", "conv_w"}));
  // fc_b (5 floats) and conv_b (4) each take a 64-byte slice; fc_w is 5 x 64 floats, conv_w 4 x 1 x 3 x 3.
  EXPECT_EQ(bucket.offsets, (std::vector<size_t>{0, 64, 64 + 1280, 64 + 1280 + 64}));
  EXPECT_EQ(bucket.bytes, 64 + 1280 + 64 + 192u);
}

// A 16-bit wire: the same buckets, half the bytes sent, and every gradient Allreduce says so (the Allreduce
// of combined BN statistics, if any, stays float32).
TEST(DataParallel, TheWireDtypeReachesTheBucketsAndTheirAllreduces) {
  ModelHelper model("small");
  ParallelOptions o = SmallNetOptions({}, 2);
  o.allreduce_dtype = DataType::kBFloat16;
  DataParallelModel dp = Parallelize(model, o);
  ASSERT_EQ(dp.buckets.size(), 1u);
  EXPECT_EQ(dp.buckets[0].wire, DataType::kBFloat16);
  EXPECT_EQ(dp.buckets[0].wire_bytes, dp.buckets[0].bytes / 2);
  int allreduces = 0;
  for (const auto& op : model.net().op())
    if (op.type() == "Allreduce") {
      ++allreduces;
      EXPECT_EQ(GetStringArgument(op, "wire_dtype", "float"), "bfloat16");
    }
  EXPECT_EQ(allreduces, 1);
}

// The common world is a blob of the graph: param_init_net's CreateCommonWorld writes it, and every collective
// (the training net's Allreduces, the broadcasts) reads it as input 0.
TEST(DataParallel, CollectivesReadTheCommunicatorThatParamInitNetCreates) {
  SmallNet net;
  net.bn = true;
  net.combine_spatial_bn = true;
  ModelHelper model("small");
  DataParallelModel dp = Parallelize(model, SmallNetOptions(net, 2));
  std::vector<std::string> worlds;
  int first_broadcast = -1, last_world = -1;
  const NetDef& init = model.param_init_net();
  for (int i = 0; i < init.op_size(); ++i) {
    if (init.op(i).type() == "CreateCommonWorld") {
      EXPECT_EQ(init.op(i).input_size(), 0) << "one shard: the devices' own communicator";
      worlds.push_back(init.op(i).output(0));
      last_world = i;
    }
    if (init.op(i).type() == "Broadcast" && first_broadcast < 0) first_broadcast = i;
  }
  ASSERT_EQ(worlds.size(), 1u);
  EXPECT_LT(last_world, first_broadcast);
  int collectives = 0;
  for (const NetDef* def : std::vector<const NetDef*>{&model.net(), &init, &dp.broadcast_net})
    for (const auto& op : def->op())
      if (IsCollective(op)) {
        EXPECT_EQ(op.input(0), worlds[0]) << DescribeOperator(op);
        ++collectives;
      }
  // One bucket, the BN statistics of the forward and the backward pass, the broadcasts of param_init_net and
  // broadcast_net.
  EXPECT_EQ(collectives, 5);

  // The trainer's order: param_init_net, a checkpoint loaded into device 0, then broadcast_net, which finds
  // the communicator that param_init_net created.
  Workspace ws;
  ws.RunNetOnce(init);
  Tensor changed;
  changed.CopyFrom(ws.Blob("cpu_0/fc_b"));
  changed.data<float>()[0] += 1;
  Feed(&ws, "cpu_0/fc_b", changed);
  ws.RunNetOnce(dp.broadcast_net);
  EXPECT_EQ(Values(ws.Blob("cpu_1/fc_b")), Values(changed));
}

// With a communicator that spans the shards, the job's world extends it, and the combined BN statistics
// (over every shard's devices) go through a channel of their own, after the gradients' channels.
TEST(DataParallel, TheShardsCommunicatorIsAWorkspaceObjectThatTheCallerSets) {
  SmallNet net;
  net.bn = true;
  net.combine_spatial_bn = true;
  ParallelOptions o = SmallNetOptions(net, 2);
  o.shard_communicator = "shards";
  ModelHelper model("small");
  Parallelize(model, o);
  std::map<std::string, std::vector<std::string>> world_inputs;
  std::map<std::string, int64_t> world_channel;
  for (const auto& op : model.param_init_net().op())
    if (op.type() == "CreateCommonWorld") {
      world_inputs[op.output(0)] = {op.input().begin(), op.input().end()};
      world_channel[op.output(0)] = GetIntArgument(op, "channel", 0);
    }
  ASSERT_EQ(world_inputs.size(), 2u);
  // The gradients are summed in place; the BN statistics into "<blob>_combined".
  std::set<std::string> read_by_bn, read_by_gradients;
  for (const auto& op : model.net().op())
    if (op.type() == "Allreduce")
      (op.output(0) == op.input(1) ? read_by_gradients : read_by_bn).insert(op.input(0));
  ASSERT_EQ(read_by_gradients.size(), 1u);
  ASSERT_EQ(read_by_bn.size(), 1u);
  EXPECT_EQ(world_inputs.at(*read_by_gradients.begin()), (std::vector<std::string>{"shards"}));
  EXPECT_EQ(world_inputs.at(*read_by_bn.begin()), (std::vector<std::string>{"shards"}));
  EXPECT_EQ(world_channel.at(*read_by_gradients.begin()), 0);
  EXPECT_EQ(world_channel.at(*read_by_bn.begin()), o.allreduce_channels);

  Workspace ws;
  auto source = std::make_shared<SyntheticSource>(1, 8, 5, /*seed=*/7);
  ws.SetObject("reader", std::make_shared<BatchReader>(source, kBatch / 2, 2));
  try {
    ws.RunNetOnce(model.param_init_net());
    ADD_FAILURE() << "param_init_net ran without the shards' communicator";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("ws.SetObject<Communicator>(\"shards\""), std::string::npos)
        << e.what();
  }
  ws.SetObject<Communicator>("shards", std::make_shared<LocalCommunicator>());  // a job of one shard
  ws.RunNetOnce(model.param_init_net());
  ws.CreateNet(model.net())->Run();
}

namespace {

// Records the thread and OpenMP budget each device's ops run with.
std::mutex thread_mutex;
std::map<std::string, std::set<std::thread::id>> threads_seen;
std::map<std::string, int> omp_threads_seen;

class RecordThreadOp : public Operator {
 public:
  using Operator::Operator;
  void Run() override {
    std::lock_guard<std::mutex> lock(thread_mutex);
    threads_seen[def_.output(0)].insert(std::this_thread::get_id());
    omp_threads_seen[def_.output(0)] = omp_get_max_threads();
    Output(0)->Resize({1});
    Output(0)->data<float>()[0] = 0;
  }
};
LOCKSTEP_OPERATOR_SCHEMA(RecordThread)
    .SetDoc("Records the thread that runs it (a test's operator)")
    .Output(0, "y", "a float: 0");
LOCKSTEP_REGISTER_CPU_OPERATOR(RecordThread, RecordThreadOp);

}  // namespace

TEST(DataParallel, EachDeviceRunsOnItsOwnThreadWithItsShareOfCores) {
  NetDef net;
  net.set_name("lanes");
  net.set_type("dag");
  net.set_num_workers(1);
  SetArgument(&net, Arg("device_lanes", int64_t{2}));
  SetArgument(&net, Arg("intra_op_threads", int64_t{1}));
  for (int step = 0; step < 3; ++step)
    for (int d = 0; d < 2; ++d) {
      auto* op = net.add_op();
      *op = MakeOperatorDef("RecordThread", {}, {fmt::format("cpu_{}/x{}", d, step)});
      SetDevice(op, {DeviceType::kCpu, d});
    }
  Workspace ws;
  Net* dag = ws.CreateNet(net);
  for (int run = 0; run < 3; ++run) dag->Run();
  std::set<std::thread::id> device0, device1;
  for (const auto& [blob, ids] : threads_seen) {
    (blob[4] == '0' ? device0 : device1).insert(ids.begin(), ids.end());
    EXPECT_EQ(omp_threads_seen[blob], 1) << blob;
  }
  EXPECT_EQ(device0.size(), 1u);
  EXPECT_EQ(device1.size(), 1u);
  EXPECT_NE(*device0.begin(), *device1.begin());
}

TEST(DataParallel, BadSetupsFailBeforeTraining) {
  auto expect_error = [](const std::function<void(ParallelOptions&)>& spoil, const std::string& message) {
    ModelHelper model("bad");
    ParallelOptions o = SmallNetOptions({}, 2);
    spoil(o);
    try {
      Parallelize(model, o);
      ADD_FAILURE() << "no error; expected: " << message;
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  expect_error([](ParallelOptions& o) { o.devices.clear(); }, "device list is empty");
  expect_error([](ParallelOptions& o) { o.devices = {0, 0}; }, "listed twice");
  expect_error([](ParallelOptions& o) { o.num_shards = 0; }, "num_shards must be at least 1, got 0");
  expect_error([](ParallelOptions& o) { o.shard_id = 2; }, "shard_id 2 must be in [0, num_shards = 1)");
  expect_error([](ParallelOptions& o) { o.allreduce_channels = 0; },
               "allreduce_channels must be in [1, 64], got 0");
  expect_error([](ParallelOptions& o) { o.allreduce_dtype = DataType::kInt32; },
               "allreduce_dtype must be float, bfloat16 or float16, got int32");
  expect_error(
      [](ParallelOptions& o) {
        o.shared_model = true;
        o.devices_per_replica = 2;
      },
      "shared_model needs CPU devices with one device per replica");
  expect_error(
      [](ParallelOptions& o) {
        o.forward_builder = [](ModelHelper&, float) { return std::vector<std::string>{}; };
      },
      "forward_builder returned no loss");
  expect_error(
      [](ParallelOptions& o) {
        o.input_builder = [](ModelHelper& model) {
          model.AddOp("ConstantFill", {}, {model.Scoped("data")},
                      {Arg("shape", std::vector<int64_t>{1, 1, 8, 8})});
          model.AddOp("Copy", {"cpu_0/data"}, {model.Scoped("copy")});  // device 1 reads device 0's blob
        };
      },
      "ops may not mix replicas");
  expect_error(
      [](ParallelOptions& o) {
        auto read = o.input_builder;
        o.input_builder = [read](ModelHelper& model) {
          read(model);
          if (model.device().id == 1) model.AddOp("Copy", {model.Scoped("data")}, {model.Scoped("extra")});
        };
      },
      "the builders must build the same replica on every device");
  expect_error(
      [](ParallelOptions& o) {
        o.input_builder = [](ModelHelper& model) {
          model.AddOp("ConstantFill", {}, {"shared"}, {Arg("shape", std::vector<int64_t>{1})});
        };
      },
      "is written by two replicas");
  expect_error([](ParallelOptions& o) { o.num_shards = 2; },
               "num_shards > 1 needs a communicator that spans the shards");
  auto sgd_with = [](float learning_rate, float momentum) {
    return [=](ParallelOptions& o) {
      o.param_update_builder = [=](ModelHelper& model) {
        SgdOptions sgd;
        sgd.base_learning_rate = learning_rate;
        sgd.momentum = momentum;
        AddMomentumSgd(model, sgd);
      };
    };
  };
  expect_error(sgd_with(-0.1f, 0.9f), "the learning rate must be positive, got -0.1");
  expect_error(sgd_with(0.1f, 1.0f), "momentum must be in [0, 1), got 1");
  expect_error([](ParallelOptions& o) { o.keep_blobs = {"sofmax"}; },
               "keep_blobs names 'sofmax', which the replicas do not write; did you mean 'softmax'?");
  expect_error(
      [](ParallelOptions& o) { o.keep_blobs = {"cpu_1/softmax"}; },
      "keep_blobs names blobs without a replica's scope, as every replica keeps them: 'softmax', not "
      "'cpu_1/softmax'");
  {
    ModelHelper model("micro");
    *model.param_init_net().add_op() =
        MakeOperatorDef("CreateDB", {}, {"reader"},
                        {Arg("db", "fashion-mnist"), Arg("batch_size", 8), Arg("num_replicas", 2)});
    ParallelOptions o = SmallNetOptions({}, 2);
    o.micro_batches = 3;
    try {
      Parallelize(model, o);
      ADD_FAILURE() << "micro-batches that do not split the reader's batch were accepted";
    } catch (const InvalidInput& e) {
      EXPECT_STREQ(e.what(),
                   "Parallelize: reader 'reader' gives each replica batches of 8, which do not split into "
                   "micro_batches=3; use a batch_size that is a multiple of 3");
    }
  }
  EXPECT_THROW(BatchPerDevice(10, 3), InvalidInput);
  EXPECT_EQ(BatchPerDevice(12, 3), 4);
  EXPECT_EQ(BatchPerDevice(16, 2, 2), 4);
}

}  // namespace lockstep::testing
