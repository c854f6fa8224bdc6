// DataParallelTable: scatter the batch, Parallelize the replicas, gather the outputs.
#include "lockstep/parallel/data_parallel_table.h"

#include "lockstep/model/layers.h"
#include "lockstep/ops/op_defs.h"
#include "lockstep/parallel/micro_batches.h"
#include "lockstep/parallel/placement.h"

namespace lockstep {
namespace {

std::string Piece(const std::string& blob, int replica) { return fmt::format("{}_part{}", blob, replica); }

// The op that cuts `blob` into one piece per replica along its first axis, on the first device.
OperatorDef Scatter(const std::string& blob, int replicas, const Device& device) {
  std::vector<std::string> pieces;
  for (int r = 0; r < replicas; ++r) pieces.push_back(Piece(blob, r));
  OperatorDef op = SplitDef(blob, pieces);
  SetDevice(&op, device);
  return op;
}

}  // namespace

DataParallelTable MakeDataParallelTable(ModelHelper& model, const ReplicaBuilder& build,
                                        const DataParallelTableOptions& t) {
  if (!build) throw InvalidInput("MakeDataParallelTable: the replica builder is empty; pass a function");
  ParallelOptions o;
  o.devices = t.devices;
  o.device_type = t.device_type;
  o.devices_per_replica = t.devices_per_replica;
  o.micro_batches = t.micro_batches;
  o.threads_per_device = t.threads_per_device;
  o.max_threads = t.max_threads;
  // The gather net reads each replica's output, whose name the replica builder gives only while the net is
  // built: too late for the memory plan to keep it, so the table's nets keep a buffer per blob.
  o.share_buffers = false;
  std::vector<std::string> outputs, losses;
  o.input_builder = [&](ModelHelper& m) {
    m.AddOp(CopyDef(Piece(t.data, m.replica().index), m.Scoped(t.data)));
    m.AddOp(CopyDef(Piece(t.label, m.replica().index), m.Scoped(t.label)));
  };
  o.forward_builder = [&](ModelHelper& m, float loss_scale) {
    std::string output = build(m, m.Scoped(t.data));
    auto [softmax, loss] = layers::SoftmaxWithLoss(m, output, m.Scoped(t.label), "softmax", "loss");
    // Micro-batches rename the forward blobs: the replica's output is its micro-batches' in order.
    for (int j = 0; j < t.micro_batches; ++j) {
      outputs.push_back(t.micro_batches > 1 ? MicroBatchName(output, j) : output);
      losses.push_back(t.micro_batches > 1 ? MicroBatchName(loss, j) : loss);
    }
    return std::vector<std::string>{layers::Scale(m, loss, "scaled_loss", loss_scale)};
  };
  o.param_update_builder = [&](ModelHelper& m) { AddMomentumSgd(m, t.sgd); };

  DataParallelTable table;
  table.parallel = Parallelize(model, o);
  table.output = t.output;
  table.losses = losses;

  const int replicas = static_cast<int>(t.devices.size()) / t.devices_per_replica;
  const Device first{t.device_type, t.devices[0]};
  NetDef& net = model.net();
  NetDef table_net = net;
  table_net.clear_op();
  *table_net.add_op() = Scatter(t.data, replicas, first);
  *table_net.add_op() = Scatter(t.label, replicas, first);
  for (const auto& op : net.op()) *table_net.add_op() = op;
  OperatorDef* gather = table_net.add_op();
  *gather = ConcatDef(outputs, t.output, t.output + "_split_info");
  SetDevice(gather, first);
  InsertCopies(&table_net, model.param_init_net());  // the other replicas' outputs come to the first device
  net = table_net;
  return table;
}

}  // namespace lockstep
