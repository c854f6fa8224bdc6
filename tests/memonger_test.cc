// ShareBlobs: which blobs it renames on small hand-written nets, and a real training run that must give
// bit-identical losses and parameters with less memory.
#include "lockstep/parallel/memonger.h"

#include "lockstep/model/layers.h"
#include "lockstep/model/optimizer.h"
#include "test_util.h"

namespace lockstep::testing {

namespace {

// The pass looks only at blob names (and at op types, for collectives), so the hand-written ops here mostly
// have an unregistered type.
OperatorDef GradientOp(const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
                       const std::string& type = "Step") {
  OperatorDef op = MakeOperatorDef(type, inputs, outputs);
  op.set_is_gradient_op(true);
  return op;
}

OperatorDef ForwardOp(const std::vector<std::string>& inputs, const std::vector<std::string>& outputs) {
  return MakeOperatorDef("Step", inputs, outputs);
}

NetDef NetOf(const std::vector<OperatorDef>& ops) {
  NetDef net;
  net.set_name("net");
  for (const auto& op : ops) *net.add_op() = op;
  return net;
}

// Original name -> new name of every blob, read off the ops of both nets (which must match otherwise).
std::map<std::string, std::string> Renaming(const NetDef& before, const NetDef& after) {
  std::map<std::string, std::string> renaming;
  EXPECT_EQ(before.op_size(), after.op_size());
  auto record = [&](const std::string& from, const std::string& to) {
    auto [it, fresh] = renaming.emplace(from, to);
    EXPECT_EQ(it->second, to) << from << " renamed two ways";
  };
  for (int i = 0; i < before.op_size(); ++i) {
    const auto &a = before.op(i), &b = after.op(i);
    EXPECT_EQ(a.type(), b.type());
    if (a.input_size() != b.input_size() || a.output_size() != b.output_size()) {
      ADD_FAILURE() << "op " << i << " changed its number of inputs or outputs";
      continue;
    }
    for (int k = 0; k < a.input_size(); ++k) record(a.input(k), b.input(k));
    for (int k = 0; k < a.output_size(); ++k) record(a.output(k), b.output(k));
  }
  return renaming;
}

std::map<std::string, std::string> Share(const NetDef& net, const MemongerOptions& options = {}) {
  return Renaming(net, ShareBlobs(net, options));
}

}  // namespace

TEST(Memonger, GradientChainAlternatesTwoBuffers) {
  // a lives over ops [0, 1], b [1, 2], c [2, 3], d [3, 4]: a and c share, b and d share, neighbours don't.
  // e, which no op reads, is a result the caller fetches: it keeps its name.
  NetDef net = NetOf({GradientOp({"x"}, {"a"}), GradientOp({"a"}, {"b"}), GradientOp({"b"}, {"c"}),
                      GradientOp({"c"}, {"d"}), GradientOp({"d"}, {"e"})});
  auto names = Share(net);
  EXPECT_EQ(names["x"], "x");
  EXPECT_EQ(names["a"], "__shared_0");
  EXPECT_EQ(names["b"], "__shared_1");
  EXPECT_EQ(names["c"], "__shared_0");
  EXPECT_EQ(names["d"], "__shared_1");
  EXPECT_EQ(names["e"], "e");
}

TEST(Memonger, RangesMustEndStrictlyBeforeTheNextBegins) {
  // a's last read is the op that writes b: sharing would make that op read and write one buffer.
  NetDef net = NetOf({GradientOp({"x"}, {"a"}), GradientOp({"a"}, {"b"}), GradientOp({"b", "x"}, {"y"})});
  auto names = Share(net, {{}, {"y"}});
  EXPECT_NE(names["a"], names["b"]);
  // Two outputs of one op are live together too.
  auto pair = Share(NetOf({GradientOp({"x"}, {"p", "q"}), GradientOp({"p", "q"}, {"y"})}), {{}, {"y"}});
  EXPECT_NE(pair["p"], pair["q"]);
}

TEST(Memonger, LongLivedBlobSharesWithNothingInsideItsRange) {
  // a is read again by op 3, so b and c, which live inside a's range, cannot take its buffer; c is written
  // by the op that reads b, so they cannot share either.
  NetDef net = NetOf({GradientOp({"x"}, {"a"}), GradientOp({"x"}, {"b"}), GradientOp({"b"}, {"c"}),
                      GradientOp({"a", "c"}, {"y"})});
  auto names = Share(net, {{}, {"y"}});
  EXPECT_NE(names["b"], names["a"]);
  EXPECT_NE(names["c"], names["a"]);
  EXPECT_NE(names["c"], names["b"]);
  EXPECT_EQ(names["y"], "y");
}

TEST(Memonger, MostRecentlyFreedBufferIsReused) {
  // a dies at op 2 and b at op 3; c, written at op 4, takes b's buffer, the one freed last.
  NetDef net = NetOf({GradientOp({"x"}, {"a"}), GradientOp({"x"}, {"b"}), GradientOp({"a"}, {"y1"}),
                      GradientOp({"b"}, {"y2"}), GradientOp({"x"}, {"c"}), GradientOp({"c"}, {"y3"})});
  auto names = Share(net, {{}, {"y1", "y2", "y3"}});
  EXPECT_EQ(names["c"], names["b"]);
  EXPECT_NE(names["c"], names["a"]);
}

TEST(Memonger, WithSizesTheBestFittingBufferIsReused) {
  // small (40 bytes) dies before big (400 bytes); fresh (40 bytes) takes small's buffer although big's was
  // freed last.
  NetDef net =
      NetOf({GradientOp({"x"}, {"small"}), GradientOp({"x"}, {"big"}), GradientOp({"small"}, {"y1"}),
             GradientOp({"big"}, {"y2"}), GradientOp({"x"}, {"fresh"}), GradientOp({"fresh"}, {"y3"})});
  MemongerOptions options{{}, {"y1", "y2", "y3"}};
  EXPECT_EQ(Share(net, options)["fresh"], Share(net, options)["big"]);
  options.blob_bytes = {{"small", 40}, {"big", 400}, {"fresh", 40}};
  auto names = Share(net, options);
  EXPECT_EQ(names["fresh"], names["small"]);
  EXPECT_NE(names["fresh"], names["big"]);
  // A blob bigger than every free buffer grows the largest one.
  options.blob_bytes["fresh"] = 1000;
  EXPECT_EQ(Share(net, options)["fresh"], names["big"]);
  // Sizes, when given, must cover every blob that may be renamed.
  options.blob_bytes.erase("fresh");
  EXPECT_THROW(ShareBlobs(net, options), InvalidInput);
}

// A blob no op reads is a result the caller fetches, unless it is named scratch (a forward mask whose readers
// read a recomputed one instead): then it shares like any other.
TEST(Memonger, UnreadBlobsShareOnlyAsScratch) {
  NetDef net = NetOf({ForwardOp({"x"}, {"a", "mask"}), ForwardOp({"a"}, {"b"}), ForwardOp({"b"}, {"c"})});
  MemongerOptions options{{}, {"c"}, /*share_activations=*/true};
  EXPECT_EQ(Share(net, options)["mask"], "mask");
  options.scratch = {"mask"};
  auto names = Share(net, options);
  EXPECT_EQ(names["mask"], "__shared_1");
  EXPECT_EQ(names["b"], "__shared_1");  // mask's last use, its write, comes before b's
  EXPECT_EQ(names["a"], "__shared_0");
}

TEST(Memonger, ActivationsShareOnlyWhenAsked) {
  NetDef net = NetOf({ForwardOp({"x"}, {"a"}), ForwardOp({"a"}, {"b"}), ForwardOp({"b"}, {"c"}),
                      GradientOp({"c"}, {"d"}), GradientOp({"d"}, {"e"}), GradientOp({"e"}, {"f"})});
  auto names = Share(net, {{}, {"f"}});
  EXPECT_EQ(names["a"], "a");
  EXPECT_EQ(names["b"], "b");
  EXPECT_EQ(names["c"], "c");
  EXPECT_EQ(names["d"], "__shared_0");
  EXPECT_EQ(names["e"], "__shared_1");
  EXPECT_EQ(names["f"], "f");
  names = Share(net, {{}, {"f"}, /*share_activations=*/true});
  EXPECT_EQ(names["a"], "__shared_0");
  EXPECT_EQ(names["b"], "__shared_1");
  EXPECT_EQ(names["c"], "__shared_0");
  EXPECT_EQ(names["d"], "__shared_1");
  EXPECT_EQ(names["e"], "__shared_0");
}

TEST(Memonger, BlobsReadBeforeWrittenCarryStateAndStay) {
  // iter and running_mean are read before this run writes them: their values must survive to the next run.
  NetDef net =
      NetOf({GradientOp({"iter"}, {"iter"}, "Iter"), GradientOp({"x", "running_mean"}, {"a"}),
             GradientOp({"a"}, {"running_mean"}), GradientOp({"x"}, {"b"}), GradientOp({"b"}, {"y"})});
  auto names = Share(net, {{}, {"y"}});
  EXPECT_EQ(names["iter"], "iter");
  EXPECT_EQ(names["running_mean"], "running_mean");
  EXPECT_NE(names["a"], "a");
  EXPECT_EQ(names["b"], names["a"]);
}

TEST(Memonger, KeptAndExternalBlobsStay) {
  NetDef net = NetOf({GradientOp({"x"}, {"a"}), GradientOp({"a"}, {"b"}), GradientOp({"b"}, {"c"}),
                      GradientOp({"c"}, {"d"}), GradientOp({"d"}, {"e"})});
  net.add_external_output("c");
  auto names = Share(net, {{}, {"a"}});
  EXPECT_EQ(names["a"], "a");
  EXPECT_EQ(names["c"], "c");
  EXPECT_EQ(names["b"], "__shared_0");
  EXPECT_EQ(names["d"], "__shared_0");
}

TEST(Memonger, NamescopeLimitsTheBlobsAndNamesTheBuffers) {
  NetDef net = NetOf({GradientOp({"gpu_0/x"}, {"gpu_0/a"}), GradientOp({"gpu_0/a"}, {"gpu_0/b"}),
                      GradientOp({"gpu_0/b"}, {"gpu_0/c"}), GradientOp({"gpu_1/x"}, {"gpu_1/a"}),
                      GradientOp({"gpu_1/a"}, {"gpu_1/b"}), GradientOp({"gpu_1/b"}, {"gpu_1/c"})});
  auto names = Share(net, {{"gpu_0/"}, {"gpu_0/c"}});
  EXPECT_EQ(names["gpu_0/a"], "gpu_0/__shared_0");
  EXPECT_EQ(names["gpu_0/b"], "gpu_0/__shared_1");
  for (const char* blob : {"gpu_1/a", "gpu_1/b", "gpu_1/c"}) EXPECT_EQ(names[blob], blob);
}

// The memory plan shares every device's blobs in one call: each device's under its own scope.
TEST(Memonger, SeveralNamescopesShareTheirDevicesBlobs) {
  NetDef net;
  for (int device : {0, 1}) {
    const std::string scope = fmt::format("gpu_{}/", device);
    for (const auto& [in, out] : {std::pair{"x", "a"}, {"a", "b"}, {"b", "c"}}) {
      OperatorDef op = GradientOp({scope + in}, {scope + out});
      SetDevice(&op, Device{DeviceType::kCpu, device});
      *net.add_op() = op;
    }
  }
  *net.add_op() = GradientOp({"x"}, {"unscoped"});
  *net.add_op() = GradientOp({"unscoped"}, {"y"});
  auto names = Share(net, {{"gpu_0/", "gpu_1/"}, {"gpu_0/c", "gpu_1/c", "y"}});
  for (const char* scope : {"gpu_0/", "gpu_1/"}) {
    EXPECT_EQ(names[fmt::format("{}a", scope)], fmt::format("{}__shared_0", scope));
    EXPECT_EQ(names[fmt::format("{}b", scope)], fmt::format("{}__shared_1", scope));
  }
  EXPECT_EQ(names["unscoped"], "unscoped");
}

TEST(Memonger, DevicesNeverShareABuffer) {
  auto on = [](OperatorDef op, int device) {
    SetDevice(&op, Device{DeviceType::kCpu, device});
    return op;
  };
  // d1's a dies before d0's b is written, but they belong to different devices.
  NetDef net = NetOf({on(GradientOp({"x"}, {"a"}), 1), on(GradientOp({"a"}, {"y1"}), 1),
                      on(GradientOp({"x"}, {"b"}), 0), on(GradientOp({"b"}, {"y0"}), 0)});
  auto names = Share(net, {{}, {"y0", "y1"}});
  EXPECT_NE(names["a"], names["b"]);
}

TEST(Memonger, CollectiveOpsKeepTheirBlobs) {
  // The allreduced gradients stay; c, outside the collective, reuses a dead buffer.
  NetDef net = NetOf({GradientOp({"x"}, {"t"}), GradientOp({"t"}, {"g0"}), GradientOp({"x"}, {"g1"}),
                      GradientOp({"g0", "g1"}, {"g0", "g1"}, "Allreduce"), GradientOp({"x"}, {"c"}),
                      GradientOp({"c", "g0", "g1"}, {"y"})});
  auto names = Share(net, {{}, {"y"}});
  EXPECT_EQ(names["g0"], "g0");
  EXPECT_EQ(names["g1"], "g1");
  EXPECT_EQ(names["c"], names["t"]);
}

TEST(Memonger, InplaceOpsStayInplace) {
  // a is rewritten in place by op 1; its whole range [0, 2] is one buffer, which b then reuses.
  NetDef net = NetOf({GradientOp({"x"}, {"a"}), GradientOp({"a"}, {"a"}, "Relu"), GradientOp({"a"}, {"y"}),
                      GradientOp({"x"}, {"b"}), GradientOp({"b"}, {"z"})});
  NetDef shared = ShareBlobs(net, {{}, {"y", "z"}});
  EXPECT_EQ(shared.op(1).input(0), shared.op(1).output(0));
  EXPECT_EQ(shared.op(0).output(0), shared.op(1).input(0));
  EXPECT_EQ(shared.op(2).input(0), shared.op(0).output(0));
  EXPECT_EQ(shared.op(3).output(0), shared.op(0).output(0));
}

TEST(Memonger, SharedNamesAvoidExistingBlobs) {
  NetDef net = NetOf({GradientOp({"__shared_0"}, {"a"}), GradientOp({"a"}, {"y"})});
  auto names = Share(net, {{}, {"y"}});
  EXPECT_EQ(names["__shared_0"], "__shared_0");
  EXPECT_EQ(names["a"], "__shared_1");
}

namespace {

// A small conv net with the training ops of the trainer: forward, backward, momentum SGD.
struct SmallModel {
  ModelHelper model{"train"};
  std::string loss, accuracy, lr;
  std::vector<std::string> moments;

  SmallModel() {
    layers::ConvOptions conv;
    conv.pad = 1;
    std::string x = layers::Conv(model, "data", "conv1", 3, 8, 3, conv);
    x = layers::SpatialBN(model, x, "bn1", 8, /*is_test=*/false);
    x = layers::Relu(model, x, "relu1");
    x = layers::MaxPool(model, x, "pool1", 2, 2);
    x = layers::Conv(model, x, "conv2", 8, 16, 3, conv);
    x = layers::SpatialBN(model, x, "bn2", 16, /*is_test=*/false, /*relu=*/true);
    x = layers::MaxPool(model, x, "pool2", 2, 2);
    x = layers::FC(model, x, "fc", 16 * 2 * 2, 10);
    auto [softmax, loss_blob] = layers::SoftmaxWithLoss(model, x, "label", "softmax", "loss");
    loss = loss_blob;
    accuracy = layers::Accuracy(model, softmax, "label", "accuracy");
    model.AddGradientOperators({loss});
    SgdBlobs sgd = AddMomentumSgd(model, SgdOptions{});
    lr = sgd.lr;
    moments = sgd.moments;
    NetDef& init = model.param_init_net();
    for (int i = 0; i < init.op_size(); ++i)
      init.mutable_op(i)->mutable_device_option()->set_random_seed(7 + i);
  }

  // Keeps what the optimizer and the caller read: parameter gradients, loss, accuracy, learning rate.
  MemongerOptions Options() const {
    MemongerOptions options;
    for (const auto& [param, grad] : model.param_to_grad()) options.keep.insert(grad);
    options.keep.insert({loss, accuracy, lr});
    return options;
  }
};

struct TrainingRun {
  std::vector<float> losses;
  std::map<std::string, std::vector<float>> state;  // parameters, running statistics and momenta
  size_t allocated_bytes = 0;
  std::map<std::string, size_t> blob_bytes;  // capacity of every blob
};

// Three steps on different batches from the model's initialisation.
TrainingRun Train(SmallModel& m, const NetDef& net) {
  Workspace ws;
  ws.RunNetOnce(m.model.param_init_net());
  Net* train = ws.CreateNet(net);
  TrainingRun run;
  for (int step = 0; step < 3; ++step) {
    Feed(&ws, "data", RandomTensor({4, 3, 8, 8}, 100 + step));
    Feed(&ws, "label", Int32Tensor({4}, {step % 10, 3, 9, 1}));
    train->Run();
    run.losses.push_back(ws.Blob(m.loss).data<float>()[0]);
  }
  std::vector<std::string> state = m.model.GetParams();
  state.insert(state.end(), m.moments.begin(), m.moments.end());
  for (const auto& name : state) run.state[name] = Values(ws.Blob(name));
  run.allocated_bytes = ws.AllocatedBytes();
  for (const auto& name : ws.BlobNames()) run.blob_bytes[name] = ws.Blob(name).capacity();
  return run;
}

// Bitwise equal losses and state from less memory.
void ExpectSameResultsWithLessMemory(const TrainingRun& baseline, const TrainingRun& run) {
  ASSERT_EQ(run.losses.size(), baseline.losses.size());
  for (size_t i = 0; i < run.losses.size(); ++i) EXPECT_EQ(run.losses[i], baseline.losses[i]) << "step " << i;
  for (const auto& [name, values] : baseline.state) {
    const auto& other = run.state.at(name);
    ASSERT_EQ(other.size(), values.size()) << name;
    for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(other[i], values[i]) << name << "[" << i << "]";
  }
  EXPECT_LT(run.allocated_bytes, baseline.allocated_bytes);
}

}  // namespace

TEST(Memonger, TrainingWithSharedGradientsIsBitIdentical) {
  SmallModel m;
  NetDef shared = ShareBlobs(m.model.net(), m.Options());
  ExpectSameResultsWithLessMemory(Train(m, m.model.net()), Train(m, shared));
}

TEST(Memonger, TrainingWithSharedActivationsIsBitIdentical) {
  SmallModel m;
  MemongerOptions options = m.Options();
  options.share_activations = true;
  ExpectSameResultsWithLessMemory(Train(m, m.model.net()), Train(m, ShareBlobs(m.model.net(), options)));
}

TEST(Memonger, TrainingWithBestFitSharingIsBitIdentical) {
  SmallModel m;
  TrainingRun baseline = Train(m, m.model.net());
  MemongerOptions options = m.Options();
  options.share_activations = true;
  options.blob_bytes = baseline.blob_bytes;
  ExpectSameResultsWithLessMemory(baseline, Train(m, ShareBlobs(m.model.net(), options)));
}

TEST(Memonger, SharedNetRunsUnderDagNet) {
  // DagNet orders ops by blob names; the shared names add the dependencies that keep reuse safe.
  SmallModel m;
  MemongerOptions options = m.Options();
  options.share_activations = true;
  NetDef shared = ShareBlobs(m.model.net(), options);
  shared.set_type("dag");
  shared.set_num_workers(4);
  ExpectSameResultsWithLessMemory(Train(m, m.model.net()), Train(m, shared));
}

}  // namespace lockstep::testing
