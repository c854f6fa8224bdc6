// DataParallelTable: Torch's `nn.DataParallelTable(1):add(net, gpus)` for lockstep graphs. Give it a
// function that builds one replica's network and a device list; feed the whole batch as two blobs (data,
// label); one run of the net splits the batch along its first axis among the replicas, runs them
// concurrently, sums their gradients, applies the same momentum-SGD update on every replica and gathers
// their outputs in batch order. A replica may itself span several devices (model parallelism).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lockstep/model/optimizer.h"
#include "lockstep/parallel/data_parallel.h"

namespace lockstep {

struct DataParallelTableOptions {
  std::vector<int> devices;  // device ids, e.g. {0, 1}
  DeviceType device_type = DeviceType::kCpu;
  int devices_per_replica = 1;  // a replica's network may place its layers on model.replica().devices
  int micro_batches = 1;
  std::string data = "data", label = "label";  // the whole batch, fed by the caller (label: int32)
  std::string output = "output";               // the replicas' outputs, gathered along the first axis
  SgdOptions sgd;
  int threads_per_device = 0, max_threads = 0;
};

// Builds one replica's network on `input` (that replica's slice of the batch, under its name scope) and
// returns its output: the logits that a softmax loss compares with the label.
using ReplicaBuilder = std::function<std::string(ModelHelper& model, const std::string& input)>;

struct DataParallelTable {
  DataParallelModel parallel;       // scopes, losses, state blobs, broadcast
  std::string output;               // options.output
  std::vector<std::string> losses;  // each replica's (unscaled) average loss over its slice
};

// Builds the table into model (whose net must be empty). Throws InvalidInput on a bad setup.
DataParallelTable MakeDataParallelTable(ModelHelper& model, const ReplicaBuilder& build,
                                        const DataParallelTableOptions& options);

}  // namespace lockstep
