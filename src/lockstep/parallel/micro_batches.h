// Pipelined micro-batches (GPipe): one forward pass becomes m clones that each read 1/m of the batch. Their
// backward passes sum every parameter's gradient over the clones, so one update follows the whole batch. On
// a model placed in stages, the executor then runs stage s of micro-batch j while stage s+1 runs
// micro-batch j-1: the forward clones are listed in micro-batch order and the backward in reverse.
#pragma once

#include <string>
#include <vector>

#include "lockstep.pb.h"

namespace lockstep {

// "<blob>_mb<j>": the name of a forward blob in micro-batch j.
std::string MicroBatchName(const std::string& blob, int micro_batch);

// Replaces ops [first_op, end) of net, a forward pass that reads the batch blobs `batch_inputs`, by a Split
// of each batch input along axis 0 into MicroBatchName(input, j) and `micro_batches` clones of the ops. In
// clone j every blob the ops write is renamed MicroBatchName(blob, j), except state that init_net creates
// (BN running statistics), which the clones update in turn; what the ops only read (parameters) is shared.
// Returns the renamed losses: for each micro-batch, MicroBatchName of every loss. Scale each clone's loss by
// 1 / micro_batches (for example through the loss scale) so that the summed gradients are the batch's.
std::vector<std::string> SplitIntoMicroBatches(NetDef* net, int first_op,
                                               const std::vector<std::string>& batch_inputs,
                                               const std::vector<std::string>& losses, int micro_batches,
                                               const NetDef& init_net);

}  // namespace lockstep
