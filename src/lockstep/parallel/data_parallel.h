// Parallelize: synchronous data parallelism on the devices of one machine (and, through the shards'
// communicator, of many), as Caffe2's data_parallel_model. The builder functions describe one replica;
// Parallelize calls them once per device under the device's scope ("cpu_0/", "cpu_1/", ...), adds the
// backward pass, allreduces the gradients in buckets that start as soon as their last gradient is computed,
// and adds each replica's update. Every replica then holds the same parameters after every step. The
// collectives read their communicator as input 0, a workspace object that the CreateCommonWorld ops
// Parallelize adds to param_init_net create: run param_init_net before the other nets, in their workspace.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lockstep/model/model_helper.h"
#include "lockstep/ops/gradient_buckets.h"
#include "lockstep/parallel/memory_plan.h"

namespace lockstep {

struct ParallelOptions {
  // Adds the ops that produce this replica's input (e.g. layers::ReadBatch; model.replica() tells which
  // slice).
  std::function<void(ModelHelper& model)> input_builder;
  // Adds the forward pass and returns its losses, already multiplied by loss_scale = 1 / (devices * shards),
  // so that the summed gradients are those of the global batch's average loss.
  std::function<std::vector<std::string>(ModelHelper& model, float loss_scale)> forward_builder;
  // Adds the parameter update (e.g. AddMomentumSgd); it reads model.param_to_grad(). Without one, Parallelize
  // builds the forward pass only: no gradients, no update.
  std::function<void(ModelHelper& model)> param_update_builder;

  std::vector<int> devices;                   // device ids, e.g. {0, 1}
  DeviceType device_type = DeviceType::kCpu;  // or kCuda, in builds with the CUDA backend
  // Model parallelism: each replica spans this many consecutive devices of the list (replica r has
  // devices[r * k .. r * k + k - 1], named by the first); the forward builder places its layers on
  // model.replica().devices (DeviceScope, PlaceStages) and the copies between them are inserted. On CUDA
  // devices, only with a single replica on one machine.
  int devices_per_replica = 1;
  // Pipelined micro-batches: each replica's forward pass runs as this many clones over slices of its batch
  // (see micro_batches.h); the losses are scaled by 1 / micro_batches as well.
  int micro_batches = 1;

  int num_shards = 1, shard_id = 0;  // processes of the job; shard_communicator spans them
  // The name of the workspace object, a Communicator that spans the shards (a connected GlooCommunicator),
  // which the caller sets before running param_init_net: ws.SetObject<Communicator>(name, gloo). Its
  // CreateCommonWorld extends it over the devices (see ops/common_world_op.cc). When empty, the devices' own
  // communicator: LocalCommunicator on the CPU; NCCL on distinct GPUs, else copy-and-sum.
  std::string shard_communicator;

  // Gradients allreduced together, in reverse creation order: a bucket takes parameters until its buffer
  // holds at least this many bytes (ops/gradient_buckets.h). With tail_bucket_bytes > 0 the last bucket,
  // which is reduced after the backward pass has ended, holds only the first parameters up to that size.
  size_t bucket_bytes = 8 << 20;
  size_t tail_bucket_bytes = 0;
  // The dtype the gradient buckets cross processes (Gloo) and GPUs (NCCL) in: kFloat, or kBFloat16 /
  // kFloat16 for half the bytes, summed in float32 at every hop (comm/wire_dtype.h); the updates read
  // float32.
  DataType allreduce_dtype = DataType::kFloat;
  // CPU devices: bucket i is allreduced on channel i % allreduce_channels of the job's communicator
  // (Communicator::Channel), so that as many collectives can be in flight at once, each channel in order.
  int allreduce_channels = 1;
  // CPU devices (Caffe2's shared_model): every replica computes with the first replica's parameters, which
  // alone are updated; the other devices keep no copy of them and no optimizer state, and their parameter
  // names are views of the first replica's (parallel/shared_parameters.h). The results are the same.
  bool shared_model = false;
  bool combine_spatial_bn = false;  // BN batch statistics over the job's whole batch: all devices, all shards
  // Blobs whose lifetimes do not overlap share buffers (parallel/memory_plan.h), and training recomputes
  // relu(BN(X)) in the backward pass instead of keeping it (parallel/recompute.h); results are unchanged.
  bool share_buffers = true;
  // With share_buffers, ReLUs are folded into the ops beside them on CPUs (parallel/fuse_relu.h); results are
  // unchanged. Without sharing every blob the net names is kept, the ReLUs' inputs too.
  bool fuse_relus = true;
  // Unscoped names never shared: blobs read after a step. The returned losses and the inputs of the ops
  // that make them, learning rates, and blobs no op reads are kept without being named.
  std::vector<std::string> keep_blobs;
  // Unscoped shapes of the blobs the input builder makes, which no shape function gives (the readers'
  // outputs): with them the plan knows every blob's size before the first step.
  std::map<std::string, TensorShape> input_shapes;
  // oneDNN threads per device; 0 = the cores divided among the devices. Devices run concurrently on their
  // own threads, at most max_threads / threads_per_device at a time (max_threads 0 = all cores).
  int threads_per_device = 0;
  int max_threads = 0;
};

struct DataParallelModel {
  std::vector<std::string> scopes;  // name scope of each replica, "cpu_0/", ...
  std::vector<std::string> losses;  // all replicas' losses (each already scaled), micro-batch clones included
  std::vector<GradientBucket> buckets;  // unscoped parameter names, as each device's Allreduce packs them
  // Unscoped names of a replica's state: parameters, BN statistics, optimizer state. A checkpoint holds
  // device 0's; after loading one into device 0, run broadcast_net.
  std::vector<std::string> state_blobs;
  // Device 0's state -> every device (and shard 0's -> every shard), through the communicator that
  // param_init_net created in the same workspace.
  NetDef broadcast_net;
  MemoryPlan memory_plan;  // this process's tensor memory per device (sizes unknown without input_shapes)
};

// Builds the data-parallel training net into model.net() (which must be empty) and appends to
// model.param_init_net() the CreateCommonWorld ops of the collectives and the broadcast of device 0's state.
// Throws InvalidInput on a bad setup: no devices, a builder missing or returning no loss, replicas that
// differ, an op on a device of another replica.
DataParallelModel Parallelize(ModelHelper& model, const ParallelOptions& options);

// The per-device batch of a global batch; throws when it does not divide evenly.
int BatchPerDevice(int batch_size, int devices, int shards = 1);

// The name scope of device `id`: "cpu_0/" or "gpu_0/".
std::string DeviceScopeName(DeviceType type, int id);

}  // namespace lockstep
