// Data-parallel planning: replicas, interleaving, combined BN statistics, gradient buckets, common worlds,
// broadcast.
#include "lockstep/parallel/data_parallel.h"

#include <omp.h>

#include <algorithm>
#include <map>
#include <set>

#include "lockstep/core/closest_names.h"
#include "lockstep/core/device_backend.h"
#include "lockstep/core/schema.h"
#include "lockstep/ops/op_defs.h"
#include "lockstep/parallel/fuse_relu.h"
#include "lockstep/parallel/memory_plan.h"
#include "lockstep/parallel/micro_batches.h"
#include "lockstep/parallel/placement.h"
#include "lockstep/parallel/recompute.h"
#include "lockstep/parallel/shared_parameters.h"

namespace lockstep {
namespace {

[[noreturn]] void Fail(const std::string& what) { throw InvalidInput("Parallelize: " + what); }

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// A kept name that no replica writes would keep nothing, and FetchBlob's advice would point back at it.
void CheckKeptBlobs(const ModelHelper& model, const std::vector<std::string>& keep,
                    const std::vector<std::string>& scopes) {
  std::set<std::string> written;  // the first replica's blobs, unscoped
  for (const NetDef* net : std::initializer_list<const NetDef*>{&model.net(), &model.param_init_net()})
    for (const auto& op : net->op())
      for (const auto& out : op.output())
        if (StartsWith(out, scopes[0])) written.insert(out.substr(scopes[0].size()));
  for (const auto& blob : keep) {
    if (written.count(blob) || written.count(MicroBatchName(blob, 0))) continue;
    for (const auto& scope : scopes)
      if (StartsWith(blob, scope) && written.count(blob.substr(scope.size())))
        Fail(fmt::format(
            "keep_blobs names blobs without a replica's scope, as every replica keeps them: '{}', "
            "not '{}'",
            blob.substr(scope.size()), blob));
    const auto closest = ClosestNames(blob, {written.begin(), written.end()});
    Fail(fmt::format("keep_blobs names '{}', which the replicas do not write{}", blob,
                     closest.empty() ? "" : fmt::format("; did you mean '{}'?", closest[0])));
  }
}

void ValidateOptions(const ModelHelper& model, const ParallelOptions& o) {
  if (o.devices.empty()) Fail("the device list is empty; pass at least one device id, e.g. devices = {0}");
  std::set<int> unique(o.devices.begin(), o.devices.end());
  if (unique.size() != o.devices.size()) Fail("a device id is listed twice");
  if (*unique.begin() < 0) Fail(fmt::format("device ids must be >= 0, got {}", *unique.begin()));
  if (o.device_type != DeviceType::kCpu && FindDeviceBackend(o.device_type) == nullptr)
    Fail("this build has no CUDA devices; use device_type CPU (CPU devices are concurrent replicas)");
  if (!o.input_builder || !o.forward_builder)
    Fail("input_builder and forward_builder are required (param_update_builder only to train)");
  if (o.devices_per_replica < 1 || o.devices.size() % o.devices_per_replica != 0)
    Fail(fmt::format("{} devices do not divide into replicas of devices_per_replica = {} devices",
                     o.devices.size(), o.devices_per_replica));
  if (o.micro_batches < 1) Fail(fmt::format("micro_batches must be at least 1, got {}", o.micro_batches));
  // Else the first run would fail on the blobs the split makes, whose names the caller never gave.
  for (const OperatorDef& op : model.param_init_net().op())
    if (op.type() == "CreateDB" && HasArgument(op, "batch_size") &&
        IntArg(op, "batch_size") % o.micro_batches)
      Fail(fmt::format(
          "reader '{}' gives each replica batches of {}, which do not split into micro_batches={}; "
          "use a batch_size that is a multiple of {}",
          op.output(0), IntArg(op, "batch_size"), o.micro_batches, o.micro_batches));
  if (o.num_shards < 1) Fail(fmt::format("num_shards must be at least 1, got {}", o.num_shards));
  if (o.shard_id < 0 || o.shard_id >= o.num_shards)
    Fail(fmt::format("shard_id {} must be in [0, num_shards = {})", o.shard_id, o.num_shards));
  if (o.num_shards > 1 && o.shard_communicator.empty())
    Fail(
        "num_shards > 1 needs a communicator that spans the shards: set shard_communicator to the name of "
        "the workspace object that holds it (a connected GlooCommunicator)");
  if (o.device_type == DeviceType::kCuda && o.devices_per_replica > 1 &&
      (o.devices.size() > static_cast<size_t>(o.devices_per_replica) || o.num_shards > 1))
    Fail(
        fmt::format("devices_per_replica = {} on CUDA devices needs a single replica on one machine: the "
                    "CUDA collectives sum over one device per replica, but each replica's gradients are "
                    "spread over its {} devices",
                    o.devices_per_replica, o.devices_per_replica));
  if (o.threads_per_device < 0 || o.max_threads < 0) Fail("threads_per_device and max_threads must be >= 0");
  if (o.allreduce_dtype != DataType::kFloat && o.allreduce_dtype != DataType::kBFloat16 &&
      o.allreduce_dtype != DataType::kFloat16)
    Fail(fmt::format("allreduce_dtype must be float, bfloat16 or float16, got {}",
                     DataTypeName(o.allreduce_dtype)));
  if (o.allreduce_channels < 1 || o.allreduce_channels > 64)
    Fail(fmt::format("allreduce_channels must be in [1, 64], got {}", o.allreduce_channels));
  if (o.device_type == DeviceType::kCuda && o.allreduce_channels > 1)
    Fail(fmt::format("allreduce_channels = {} needs CPU devices; CUDA collectives use one communicator",
                     o.allreduce_channels));
  if (o.shared_model && (o.device_type != DeviceType::kCpu || o.devices_per_replica > 1))
    Fail(
        "shared_model needs CPU devices with one device per replica: the replicas read one copy in host "
        "memory");
  if (model.net().op_size() > 0)
    Fail(fmt::format("model '{}' already has {} ops; the builders must add all of them", model.name(),
                     model.net().op_size()));
}

// Ops that share statistics across the replicas (Caffe2's combined SpatialBN) are rewritten as their schemas
// say; the sums they then need are inserted by Interleave.
void CombineAcrossReplicas(NetDef* net, int replicas) {
  NetDef rewritten = *net;
  rewritten.clear_op();
  for (const auto& op : net->op()) {
    const ReplicaRewrite& rewrite = SchemaRegistry::Of(op).combine_across_replicas();
    if (!rewrite) {
      *rewritten.add_op() = op;
      continue;
    }
    for (auto& replacement : rewrite(op, replicas)) *rewritten.add_op() = std::move(replacement);
  }
  *net = rewritten;
}

// Each op belongs to one replica (runs on one of its devices) and touches only that replica's blobs; no blob
// is written by two replicas. Returns each op's replica index.
std::vector<int> ReplicaOfEachOp(const NetDef& net, const ParallelOptions& o,
                                 const std::vector<std::string>& scopes) {
  std::vector<int> device_of;
  std::map<std::string, int> writer;
  for (const auto& op : net.op()) {
    Device device = DeviceOf(op);
    auto it = std::find(o.devices.begin(), o.devices.end(), device.id);
    if (device.type != o.device_type || it == o.devices.end())
      Fail(fmt::format("{} runs on {}, which is not one of the model's devices", DescribeOperator(op),
                       device.ToString()));
    int index = static_cast<int>(it - o.devices.begin()) / o.devices_per_replica;
    auto check = [&](const std::string& blob) {
      for (size_t j = 0; j < scopes.size(); ++j)
        if (static_cast<int>(j) != index && StartsWith(blob, scopes[j]))
          Fail(
              fmt::format("{} on {} uses '{}' of another replica; ops may not mix replicas: build each "
                          "replica from its own scope's blobs",
                          DescribeOperator(op), device.ToString(), blob));
    };
    for (const auto& blob : op.input()) check(blob);
    for (const auto& blob : op.output()) {
      check(blob);
      auto [entry, inserted] = writer.emplace(blob, index);
      if (!inserted && entry->second != index)
        Fail(
            fmt::format("blob '{}' is written by two replicas; name replica blobs with "
                        "model.Scoped()",
                        blob));
    }
    device_of.push_back(index);
  }
  return device_of;
}

OperatorDef OnDevice(OperatorDef op, const Device& device) {
  SetDevice(&op, device);
  return op;
}

// Orders the ops as op 0 of every replica, op 1 of every replica, ... so that the replicas advance together
// (and a cross-replica collective can sit between two groups), and inserts after every group of ops whose
// outputs are summed across replicas (ChannelStats, ChannelBackpropStats) their Allreduce into CombinedName.
void Interleave(NetDef* net, const std::vector<int>& replica_of, int replicas, const std::string& world,
                const Device& first_device) {
  std::vector<std::vector<const OperatorDef*>> replica(replicas);
  for (int i = 0; i < net->op_size(); ++i) replica[replica_of[i]].push_back(&net->op(i));
  for (int d = 1; d < replicas; ++d) {
    if (replica[d].size() != replica[0].size())
      Fail(
          fmt::format("replica {} has {} ops but replica 0 has {}; the builders must build the same replica "
                      "on every device",
                      d, replica[d].size(), replica[0].size()));
    for (size_t j = 0; j < replica[0].size(); ++j)
      if (replica[d][j]->type() != replica[0][j]->type())
        Fail(
            fmt::format("op {} is {} on replica {} but {} on replica 0; the builders must build the same "
                        "replica on every device",
                        j, replica[d][j]->type(), d, replica[0][j]->type()));
  }
  NetDef interleaved = *net;
  interleaved.clear_op();
  for (size_t j = 0; j < replica[0].size(); ++j) {
    std::vector<std::string> inputs, outputs;
    for (int d = 0; d < replicas; ++d) {
      const OperatorDef& op = *replica[d][j];
      *interleaved.add_op() = op;
      if (!SchemaRegistry::Of(op).summed_across_replicas()) continue;
      for (const auto& blob : op.output()) {
        inputs.push_back(blob);
        outputs.push_back(CombinedName(blob));
      }
    }
    if (inputs.empty()) continue;
    OperatorDef sum = OnDevice(AllreduceDef(world, inputs, outputs, replicas), first_device);
    sum.set_is_gradient_op(replica[0][j]->is_gradient_op());  // a sum of the backward pass belongs to it
    *interleaved.add_op() = std::move(sum);
  }
  *net = interleaved;
}

// The replica's trainable parameters, unscoped, in reverse creation order: about the order in which backward
// computes their gradients.
std::vector<GradientBucket> PlanBuckets(const ModelHelper& model, const std::string& scope,
                                        size_t bucket_bytes, size_t tail_bucket_bytes, DataType wire) {
  std::vector<std::pair<std::string, Shape>> params;
  auto scoped = model.GetTrainableParams(scope);
  for (auto it = scoped.rbegin(); it != scoped.rend(); ++it)
    params.emplace_back(it->substr(scope.size()), model.Param(*it).shape);
  return PlanGradientBuckets(params, bucket_bytes, tail_bucket_bytes, wire);
}

// The workspace object of channel k of the job's communicator; channel 0 is the world itself.
std::string ChannelWorld(const std::string& job_world, int k) {
  return k == 0 ? job_world : fmt::format("{}_channel{}", job_world, k);
}

// Inserts each bucket's Allreduce right after the last backward op that writes or reads one of its gradients
// as the replica's own (combined BN sums a BN parameter's gradients across the replicas itself, from each
// replica's part); the updates that come later read the sums. Bucket i goes to channel i % channels.
void AddBucketAllreduces(NetDef* net, const ModelHelper& model, const std::vector<GradientBucket>& buckets,
                         const std::vector<std::string>& scopes, const std::string& job_world, int channels,
                         const Device& first_device) {
  std::map<std::string, int> last_use;
  for (int i = 0; i < net->op_size(); ++i)
    if (net->op(i).is_gradient_op()) {
      for (const auto& blob : net->op(i).input()) last_use[blob] = i;
      for (const auto& blob : net->op(i).output()) last_use[blob] = i;
    }
  std::multimap<int, OperatorDef> after;
  for (size_t b = 0; b < buckets.size(); ++b) {
    const GradientBucket& bucket = buckets[b];
    const std::string world = ChannelWorld(job_world, static_cast<int>(b % channels));
    std::vector<std::string> grads;
    int position = -1;
    for (const auto& scope : scopes)
      for (const auto& param : bucket.params) {
        auto grad = model.param_to_grad().find(scope + param);
        if (grad == model.param_to_grad().end())
          Fail(fmt::format("parameter '{}' gets no gradient from the losses; remove it or connect it",
                           scope + param));
        grads.push_back(grad->second);
        auto use = last_use.find(grad->second);
        LOCKSTEP_ENFORCE(use != last_use.end(), "gradient '{}' is never written", grad->second);
        position = std::max(position, use->second);
      }
    after.emplace(position,
                  OnDevice(AllreduceDef(world, grads, grads, static_cast<int>(scopes.size()), bucket.wire),
                           first_device));
  }
  NetDef planned = *net;
  planned.clear_op();
  for (int i = 0; i < net->op_size(); ++i) {
    *planned.add_op() = net->op(i);
    auto [begin, end] = after.equal_range(i);
    for (auto it = begin; it != end; ++it) *planned.add_op() = it->second;
  }
  *net = planned;
}

void AddComputedParamsBroadcast(NetDef* net, const ModelHelper& model, const std::vector<std::string>& scopes,
                                const std::string& job_world, const Device& first_device) {
  std::vector<std::string> blobs;
  for (const auto& scope : scopes)
    for (const auto& name : model.GetComputedParams(scopes[0]))
      blobs.push_back(scope + name.substr(scopes[0].size()));
  if (!blobs.empty())
    *net->add_op() = OnDevice(BroadcastDef(job_world, blobs, static_cast<int>(scopes.size())), first_device);
}

// Appends to init the CreateCommonWorld of each world that a collective of `nets` reads: the job's and its
// channels' (extending the shards' communicator when there is one), then the statistics' channel after them.
void AddCommonWorlds(NetDef* init, const std::vector<const NetDef*>& nets, const std::string& job_world,
                     const std::string& statistics_world, const ParallelOptions& o) {
  std::set<std::string> read;
  for (const NetDef* net : nets)
    for (const auto& op : net->op())
      if (IsCollective(op)) read.insert(op.input(0));
  std::vector<int64_t> first_devices;
  for (size_t i = 0; i < o.devices.size(); i += o.devices_per_replica) first_devices.push_back(o.devices[i]);
  const Device first_device{o.device_type, o.devices[0]};
  for (int k = 0; k < o.allreduce_channels; ++k)
    if (read.count(ChannelWorld(job_world, k)))
      *init->add_op() =
          OnDevice(CreateCommonWorldDef(ChannelWorld(job_world, k), first_devices, o.shard_communicator, k),
                   first_device);
  if (statistics_world != job_world && read.count(statistics_world))
    *init->add_op() = OnDevice(
        CreateCommonWorldDef(statistics_world, first_devices, o.shard_communicator, o.allreduce_channels),
        first_device);
}

// The state every replica initialises: what param_init_net writes under the scope, unscoped.
std::vector<std::string> StateBlobs(const NetDef& init, const std::string& scope) {
  std::vector<std::string> names;
  for (const auto& op : init.op())
    for (const auto& blob : op.output())
      if (StartsWith(blob, scope) &&
          std::find(names.begin(), names.end(), blob.substr(scope.size())) == names.end())
        names.push_back(blob.substr(scope.size()));
  return names;
}

}  // namespace

std::string DeviceScopeName(DeviceType type, int id) {
  return fmt::format("{}_{}/", type == DeviceType::kCuda ? "gpu" : "cpu", id);
}

int BatchPerDevice(int batch_size, int devices, int shards) {
  int replicas = devices * shards;
  if (replicas <= 0) throw InvalidInput(fmt::format("need at least one device, got {}", replicas));
  if (batch_size <= 0 || batch_size % replicas != 0)
    throw InvalidInput(
        fmt::format("batch size {} does not divide evenly among {} devices x {} shards; use a "
                    "multiple of {}",
                    batch_size, devices, shards, replicas));
  return batch_size / replicas;
}

namespace {

DataParallelModel BuildDataParallel(ModelHelper& model, const ParallelOptions& o) {
  const int replicas = static_cast<int>(o.devices.size()) / o.devices_per_replica;
  const Device first_device{o.device_type, o.devices[0]};
  const bool single = replicas == 1 && o.num_shards == 1;
  const bool training = static_cast<bool>(o.param_update_builder);  // else a forward pass only
  DataParallelModel dp;
  // The workspace objects that the collectives read: the job's communicator (gradients, broadcast) and the
  // one of the combined BN statistics, one and the same without shards; with shards the statistics have a
  // channel of their own, so that the forward and backward passes never wait behind a gradient bucket.
  const std::string job_world = model.net().name() + "/common_world";
  const std::string statistics_world =
      o.shard_communicator.empty() ? job_world : model.net().name() + "/statistics_common_world";

  const float loss_scale = 1.0f / static_cast<float>(replicas * o.num_shards * o.micro_batches);
  // Calls build(r) for the first `count` replicas, each under its device and name scope.
  auto for_each_replica = [&](int count, const std::function<void(int)>& build) {
    for (int r = 0; r < count; ++r) {
      ModelHelper::Replica replica{o.shard_id * replicas + r, o.num_shards * replicas, {}};
      for (int k = 0; k < o.devices_per_replica; ++k)
        replica.devices.push_back({o.device_type, o.devices[r * o.devices_per_replica + k]});
      ModelHelper::DeviceScope device_scope(model, replica.devices[0]);
      ModelHelper::NameScope name_scope(model, DeviceScopeName(o.device_type, replica.devices[0].id));
      model.set_replica(replica);
      if (static_cast<int>(dp.scopes.size()) == r) dp.scopes.push_back(model.name_scope());
      build(r);
    }
    model.set_replica({});
  };
  for_each_replica(replicas, [&](int r) {
    const int input_begin = model.net().op_size();
    o.input_builder(model);
    const int forward_begin = model.net().op_size();
    auto losses = o.forward_builder(model, loss_scale);
    if (training && losses.empty())
      Fail(
          fmt::format("forward_builder returned no loss for the replica on device {}; return the loss blobs "
                      "to train",
                      o.devices[r * o.devices_per_replica]));
    if (o.micro_batches > 1) {
      // The batch blobs: what the input ops write and the forward pass reads.
      std::set<std::string> read;
      for (int i = forward_begin; i < model.net().op_size(); ++i)
        read.insert(model.net().op(i).input().begin(), model.net().op(i).input().end());
      std::vector<std::string> batch_inputs;
      for (int i = input_begin; i < forward_begin; ++i)
        for (const auto& blob : model.net().op(i).output())
          if (read.count(blob)) batch_inputs.push_back(blob);
      losses = SplitIntoMicroBatches(&model.net(), forward_begin, batch_inputs, losses, o.micro_batches,
                                     model.param_init_net());
    }
    dp.losses.insert(dp.losses.end(), losses.begin(), losses.end());
  });
  // The whole job's batch, so that k shards of d devices normalize as one process of k * d devices does.
  if (o.combine_spatial_bn && replicas * o.num_shards > 1)
    CombineAcrossReplicas(&model.net(), replicas * o.num_shards);
  const bool shared = o.shared_model && replicas > 1;
  if (training) {
    model.AddGradientOperators(dp.losses);
    // With shared parameters only the first replica updates, once the other replicas read its copy.
    if (!shared) for_each_replica(replicas, [&](int) { o.param_update_builder(model); });
  }
  InsertCopies(&model.net(), model.param_init_net());

  auto unscoped_params = [&](int d) {
    std::vector<std::string> names;
    for (const auto& name : model.GetParams(dp.scopes[d])) names.push_back(name.substr(dp.scopes[d].size()));
    return names;
  };
  const auto first_params = unscoped_params(0);
  for (int r = 1; r < replicas; ++r)
    if (unscoped_params(r) != first_params)
      Fail(
          fmt::format("the replica on device {} has other parameters than the first; the builders must build "
                      "the same replica on every device",
                      o.devices[r * o.devices_per_replica]));

  Interleave(&model.net(), ReplicaOfEachOp(model.net(), o, dp.scopes), replicas, statistics_world,
             first_device);
  dp.buckets = PlanBuckets(model, dp.scopes[0], o.bucket_bytes, o.tail_bucket_bytes, o.allreduce_dtype);
  if (training && !single)
    AddBucketAllreduces(&model.net(), model, dp.buckets, dp.scopes, job_world, o.allreduce_channels,
                        first_device);
  // Caffe2's broadcast_computed_params: after each step every replica takes the first one's BN running
  // statistics, so that an evaluation net on any device, or on any shard, reads the checkpoint's. Combined
  // statistics are the same on every replica already.
  if (training && !single && !o.combine_spatial_bn)
    AddComputedParamsBroadcast(&model.net(), model, dp.scopes, job_world, first_device);
  if (shared) {
    std::vector<std::string> trainable;
    for (const auto& name : model.GetTrainableParams(dp.scopes[0]))
      trainable.push_back(name.substr(dp.scopes[0].size()));
    ReadFirstReplicaParameters(&model.net(), &model.param_init_net(), dp.scopes, trainable);
    if (training) for_each_replica(1, [&](int) { o.param_update_builder(model); });
  }

  // Part of the plan: what is cheaper to compute again than to keep is not kept.
  MemoryPlanOptions plan;
  if (training && o.share_buffers) plan.scratch = RecomputeNormalizedActivations(&model.net());
  plan.share = o.share_buffers;
  plan.scopes = dp.scopes;
  plan.keep.insert(dp.losses.begin(), dp.losses.end());
  for (const auto& [param, grad] : model.param_to_grad()) {
    plan.keep.insert(grad);
    plan.gradients.insert(grad);
  }
  for (const auto& param : model.params()) plan.parameters.insert(param.name);
  const std::set<std::string> losses(dp.losses.begin(), dp.losses.end());
  for (const auto& op : model.net().op()) {
    // The schedule's learning rates, and what a returned loss is computed from (the loss before its Scale):
    // callers read them after a step.
    if (op.type() == "LearningRate") plan.keep.insert(op.output().begin(), op.output().end());
    if (!op.is_gradient_op() && std::any_of(op.output().begin(), op.output().end(),
                                            [&](const std::string& out) { return losses.count(out) > 0; }))
      plan.keep.insert(op.input().begin(), op.input().end());
  }
  CheckKeptBlobs(model, o.keep_blobs, dp.scopes);
  for (const auto& scope : dp.scopes) {
    for (const auto& blob : o.keep_blobs) {
      plan.keep.insert(scope + blob);
      for (int j = 0; j < o.micro_batches; ++j) plan.keep.insert(MicroBatchName(scope + blob, j));
    }
    for (const auto& [blob, shape] : o.input_shapes) plan.given[scope + blob] = shape;
  }
  if (o.fuse_relus && o.share_buffers) FuseRelus(&model.net(), plan.keep);
  dp.memory_plan = PlanMemory(&model.net(), model.param_init_net(), plan);

  dp.state_blobs = StateBlobs(model.param_init_net(), dp.scopes[0]);
  if (shared) AddViewsOfFirstReplicaState(&model.param_init_net(), dp.scopes, dp.state_blobs, first_device);
  dp.broadcast_net.set_name(model.net().name() + "_broadcast");
  // A model without state of its own (a test model reading a training model's parameters) has nothing to
  // broadcast.
  if (!single && !dp.state_blobs.empty()) {
    std::vector<std::string> blobs;
    for (const auto& scope : dp.scopes)
      for (const auto& name : dp.state_blobs) blobs.push_back(scope + name);
    *dp.broadcast_net.add_op() = OnDevice(BroadcastDef(job_world, blobs, replicas), first_device);
  }
  AddCommonWorlds(&model.param_init_net(), {&model.net(), &dp.broadcast_net}, job_world, statistics_world, o);
  if (dp.broadcast_net.op_size() > 0) *model.param_init_net().add_op() = dp.broadcast_net.op(0);

  const int cores = o.max_threads > 0 ? o.max_threads : omp_get_num_procs();
  if (o.threads_per_device > cores)
    Fail(fmt::format("threads_per_device {} exceeds the {} cores available", o.threads_per_device, cores));
  const int devices = static_cast<int>(o.devices.size());
  const int threads = o.threads_per_device > 0 ? o.threads_per_device : std::max(1, cores / devices);
  NetDef& net = model.net();
  net.set_type("dag");
  net.set_num_workers(1);
  SetArgument(&net, Arg("device_lanes", int64_t{std::clamp(cores / threads, 1, devices)}));
  SetArgument(&net, Arg("intra_op_threads", int64_t{threads}));
  return dp;
}

}  // namespace

DataParallelModel Parallelize(ModelHelper& model, const ParallelOptions& o) {
  ValidateOptions(model, o);
  // A builder that throws leaves the model as it was, so that the corrected call may build it again.
  const ModelHelper before = model;
  try {
    return BuildDataParallel(model, o);
  } catch (...) {
    model = before;
    throw;
  }
}

}  // namespace lockstep
