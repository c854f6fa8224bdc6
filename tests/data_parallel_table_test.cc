// DataParallelTable: fed the whole batch, a table of replicas (each on one device, or spanning two with
// micro-batches) gathers the same outputs and trains to the same parameters as a table of one device.
#include "lockstep/parallel/data_parallel_table.h"

#include "lockstep/parallel/placement.h"
#include "small_conv_net.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

constexpr int kBatch = 12;

struct Table {
  std::vector<int> devices = {0};
  int devices_per_replica = 1;
  int micro_batches = 1;
};

struct Run {
  std::vector<std::vector<float>> outputs;  // gathered outputs of every step
  std::map<std::string, std::vector<float>> params;
};

Run TrainTable(const Table& spec, int steps) {
  DataParallelTableOptions options;
  options.devices = spec.devices;
  options.devices_per_replica = spec.devices_per_replica;
  options.micro_batches = spec.micro_batches;
  options.sgd.base_learning_rate = 0.1f;
  options.threads_per_device = 1;
  options.max_threads = 2;
  ModelHelper model("table");
  DataParallelTable table = MakeDataParallelTable(
      model,
      [](ModelHelper& m, const std::string& input) {
        std::string logits = BuildConvNet(m, input);
        const auto& devices = m.replica().devices;
        if (devices.size() == 2) PlaceLayers(m, {{"fc1", devices[1]}}, devices);
        return logits;
      },
      options);
  Workspace ws;
  ws.RunNetOnce(model.param_init_net());
  Net* net = ws.CreateNet(model.net());
  Run run;
  for (int step = 0; step < steps; ++step) {
    Feed(&ws, "data", RandomTensor({kBatch, 1, 8, 8}, 100 + step));
    std::vector<int32_t> labels(kBatch);
    for (int i = 0; i < kBatch; ++i) labels[i] = (i * 7 + step) % 5;
    Feed(&ws, "label", Int32Tensor({kBatch}, labels));
    net->Run();
    EXPECT_EQ(ws.Blob(table.output).shape(), (Shape{kBatch, 5}));
    run.outputs.push_back(Values(ws.Blob(table.output)));
  }
  for (const auto& name : model.GetTrainableParams(table.parallel.scopes[0]))
    run.params[name.substr(table.parallel.scopes[0].size())] = Values(ws.Blob(name));
  return run;
}

void ExpectSameAsOneDevice(const Table& spec) {
  Run one = TrainTable({}, 5), many = TrainTable(spec, 5);
  for (size_t step = 0; step < one.outputs.size(); ++step)
    EXPECT_LE(RelativeDifference(many.outputs[step], one.outputs[step]), 1e-5) << "step " << step;
  ASSERT_EQ(many.params.size(), one.params.size());
  for (const auto& [name, values] : one.params)
    EXPECT_LE(RelativeDifference(many.params.at(name), values), 1e-5) << name;
  EXPECT_GT(RelativeDifference(one.outputs.back(), one.outputs.front()), 1e-3) << "the outputs change";
}

}  // namespace

TEST(DataParallelTable, ReplicasGatherAndTrainLikeOneDevice) { ExpectSameAsOneDevice({{0, 1, 2}, 1, 1}); }

TEST(DataParallelTable, ReplicasSpanningTwoDevicesWithMicroBatchesTrainLikeOneDevice) {
  ExpectSameAsOneDevice({{0, 1, 2, 3}, 2, 2});
}

TEST(DataParallelTable, ABatchThatDoesNotSplitIsAClearError) {
  DataParallelTableOptions options;
  options.devices = {0, 1};
  ModelHelper model("table");
  DataParallelTable table = MakeDataParallelTable(model, BuildConvNet, options);
  Workspace ws;
  ws.RunNetOnce(model.param_init_net());
  Feed(&ws, "data", RandomTensor({3, 1, 8, 8}, 1));
  Feed(&ws, "label", Int32Tensor({3}, {0, 1, 2}));
  Net* net = ws.CreateNet(model.net());
  try {
    net->Run();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not divide into 2 equal pieces"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(MakeDataParallelTable(model, nullptr, options), InvalidInput);
}

}  // namespace lockstep::testing
