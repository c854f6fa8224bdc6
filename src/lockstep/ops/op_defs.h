// Constructors of the operators that code outside ops/ adds to a graph (placement's copies, the splits of
// micro-batches and replicas, mixed precision's casts, the optimizer's update ops, data parallelism's
// collectives and their communicators). Each is defined next to
// its operator, so that an operator's type and argument names are written in its own file only.
#pragma once

#include <string>
#include <vector>

#include "lockstep/core/net_def.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

OperatorDef CopyDef(const std::string& from, const std::string& to);
// Cuts `input` along axis 0 into equal pieces, one per output name.
OperatorDef SplitDef(const std::string& input, const std::vector<std::string>& pieces);
// Joins `inputs` along axis 0 into `output`; `split_info` receives the pieces' sizes.
OperatorDef ConcatDef(const std::vector<std::string>& inputs, const std::string& output,
                      const std::string& split_info);
OperatorDef CastDef(const std::string& input, const std::string& output, DataType to);
OperatorDef ScaleDef(const std::string& input, const std::string& output, float scale);
OperatorDef ConstantFillDef(const std::string& output, const Shape& shape, float value,
                            DataType dtype = DataType::kFloat);
// The iteration counter (int64, in place) and the learning rate that follows it; `args` are
// LearningRate's: base_lr, policy and the policy's own.
OperatorDef IterDef(const std::string& iter);
OperatorDef LearningRateDef(const std::string& iter, const std::string& lr, const std::vector<Arg>& args);
// param -= lr * (grad + weight_decay * param) with momentum, in place on grad, moment and param.
OperatorDef MomentumSgdUpdateDef(const std::string& grad, const std::string& moment, const std::string& lr,
                                 const std::string& param, float momentum, bool nesterov, float weight_decay);
// Writes into the workspace object `world` the communicator of `devices` (the replicas' first devices, in the
// order of the collectives' buffers); with `shards`, the name of the caller's communicator that spans the
// shards, the job's communicator through it, or with channel k >= 1 its channel k (Communicator::Channel).
OperatorDef CreateCommonWorldDef(const std::string& world, const std::vector<int64_t>& devices,
                                 const std::string& shards = "", int channel = 0);
// Collectives through the communicator `world`: `blobs` are grouped by device, blob j of device d at
// d * m + j for m blobs per device. Allreduce writes the sums over all devices of blob i into outputs[i];
// Broadcast copies device 0's blobs to the others, in place. Allreduce's sums cross processes as `wire`
// values (float, bfloat16 or float16; comm/wire_dtype.h).
OperatorDef AllreduceDef(const std::string& world, const std::vector<std::string>& blobs,
                         const std::vector<std::string>& outputs, int num_devices,
                         DataType wire = DataType::kFloat);
OperatorDef BroadcastDef(const std::string& world, const std::vector<std::string>& blobs, int num_devices);

}  // namespace lockstep
