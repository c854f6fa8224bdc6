#include "lockstep/train/training_models.h"

#include <fmt/format.h>

#include "lockstep/core/buffer_placement.h"
#include "lockstep/core/schema.h"
#include "lockstep/model/layers.h"
#include "lockstep/model/mixed_precision.h"
#include "lockstep/model/optimizer.h"
#include "lockstep/model/zoo.h"
#include "lockstep/parallel/micro_batches.h"
#include "lockstep/parallel/placement.h"
#include "lockstep/train/memory_report.h"

namespace lockstep {
namespace {

constexpr const char* kData = "data";  // the batch and its labels, as ReadBatch writes them
constexpr const char* kLabel = "label";

DataType ComputeType(const TrainerConfig& c) { return ParseFloatType(c.dtype, "--dtype"); }

float LossScale(const TrainerConfig& c) {
  if (c.loss_scale > 0) return c.loss_scale;
  return ComputeType(c) == DataType::kFloat16 ? 128.0f : 1.0f;
}

// cuDNN's and cuBLAS's options, as arguments of the ops whose schemas take them.
void SetGpuOptions(const TrainerConfig& c, NetDef* net) {
  GpuOptions gpu;
  gpu.cudnn_workspace_bytes = int64_t{c.cudnn_workspace_limit_mb} << 20;
  gpu.enable_tensor_core = c.enable_tensor_core;
  gpu.float16_compute = c.float16_compute;
  lockstep::SetGpuOptions(gpu, net);
}

}  // namespace

void BuildTrainingModels(const TrainerConfig& config, const std::string& shard_communicator,
                         TrainingModels* m, int64_t steps_per_epoch) {
  m->train.set_seed(config.seed);
  ModelConfig model_config{config.num_channels, config.image_size, config.num_labels, false};
  std::vector<std::string> losses, accuracies, lrs;
  ParallelOptions options;
  options.device_type = config.device_type;
  if (config.device_type == DeviceType::kCuda && !config.gpus.empty())
    options.devices = config.gpus;
  else
    for (int d = 0; d < config.num_devices; ++d) options.devices.push_back(d);
  const DataType compute_type = ComputeType(config);
  const float loss_scale_factor = LossScale(config);
  options.devices_per_replica = config.model_parallel;
  options.micro_batches = config.micro_batches;
  options.num_shards = config.num_shards;
  options.shard_id = config.shard_id;
  options.shard_communicator = shard_communicator;
  options.input_builder = [](ModelHelper& model) { layers::ReadBatch(model, kTrainReader, kData, kLabel); };
  options.forward_builder = [&](ModelHelper& model, float loss_scale) {
    const int first_op = model.net().op_size();
    std::string logits = BuildModel(config.model, model, model.Scoped(kData), model_config);
    if (compute_type != DataType::kFloat)
      logits = ComputeInLowPrecision(model, first_op, model.Scoped(kData), logits, compute_type);
    auto [softmax, loss] = layers::SoftmaxWithLoss(model, logits, model.Scoped(kLabel), "softmax", "loss");
    losses.push_back(loss);
    accuracies.push_back(layers::Accuracy(model, softmax, model.Scoped(kLabel), "accuracy"));
    std::string scaled = layers::Scale(model, loss, "scaled_loss", loss_scale * loss_scale_factor);
    if (config.model_parallel > 1) {
      const int layers = model.net().op_size() - first_op;
      if (config.model_parallel > layers)
        throw InvalidInput(
            fmt::format("--model_parallel {} is more stages than the {} layers of {}; use at most {}",
                        config.model_parallel, layers, config.model, layers));
      const int64_t batch = config.batch_size / TrainingReplicas(config) / config.micro_batches;
      auto starts = BalancedStageStarts(
          model, first_op, config.model_parallel,
          {{model.Scoped(kData), {{batch, config.num_channels, config.image_size, config.image_size}}},
           {model.Scoped(kLabel), {{batch}, DataType::kInt32}}});
      PlaceStages(model, starts, model.replica().devices);
    }
    return std::vector<std::string>{scaled};
  };
  options.param_update_builder = [&](ModelHelper& model) {
    SgdOptions sgd;
    sgd.base_learning_rate = config.base_learning_rate;
    sgd.momentum = config.momentum;
    sgd.nesterov = config.nesterov;
    sgd.weight_decay = config.weight_decay;
    if (config.lr_step_epochs > 0 && steps_per_epoch > 0)
      sgd.schedule = {Arg("policy", std::string("step")),
                      Arg("stepsize", int64_t{config.lr_step_epochs} * steps_per_epoch),
                      Arg("gamma", config.lr_gamma)};
    UnscaleGradients(model, loss_scale_factor);
    lrs.push_back(AddMomentumSgd(model, sgd).lr);
  };
  options.combine_spatial_bn = config.combine_spatial_bn;
  options.bucket_bytes = static_cast<size_t>(config.allreduce_bucket_mb * (1 << 20));
  options.tail_bucket_bytes = static_cast<size_t>(config.allreduce_tail_bucket_mb * (1 << 20));
  options.allreduce_channels = AllreduceChannels(config);
  options.allreduce_dtype = ParseFloatType(config.allreduce_dtype, "--allreduce_dtype");
  options.share_buffers = config.share_buffers;
  options.input_shapes = TrainingInputShapes(config);
  options.keep_blobs = {"loss", "accuracy"};
  options.max_threads = config.threads;
  options.threads_per_device = config.threads > 0 ? std::max(1, config.threads / config.num_devices) : 0;
  m->parallel = Parallelize(m->train, options);
  if (config.device_type == DeviceType::kCuda) SetGpuOptions(config, &m->train.net());
  for (int j = 0; j < config.micro_batches; ++j) {
    m->train_loss.push_back(config.micro_batches > 1 ? MicroBatchName(losses[0], j) : losses[0]);
    m->train_accuracy.push_back(config.micro_batches > 1 ? MicroBatchName(accuracies[0], j) : accuracies[0]);
  }
  m->lr = lrs[0];

  // Evaluation runs on every replica's first device and parameters (in float32), each reading its slice of a
  // test batch, with the executor settings of the training net.
  model_config.is_test = true;
  for (size_t r = 0; r < m->parallel.scopes.size(); ++r) {
    ModelHelper::NameScope scope(m->test, m->parallel.scopes[r]);
    ModelHelper::DeviceScope device(m->test,
                                    {config.device_type, options.devices[r * config.model_parallel]});
    TestReplica replica{m->test.Scoped("test_data"), m->test.Scoped("test_label"), ""};
    replica.logits = BuildModel(config.model, m->test, replica.data, model_config);
    m->test_replicas.push_back(replica);
  }
  m->test.net().set_type(m->train.net().type());
  m->test.net().set_num_workers(m->train.net().num_workers());
  for (const auto& arg : m->train.net().arg())  // the executor's settings, not the training net's placement
    if (!IsBufferPlacementArgument(arg)) *m->test.net().add_arg() = arg;
  if (config.device_type == DeviceType::kCuda) SetGpuOptions(config, &m->test.net());
  const MemoryPlan evaluation = PlanEvaluationNet(config, m->parallel.scopes, m->test_replicas,
                                                  m->train.param_init_net(), &m->test.net());
  if (!config.test_data.empty())
    m->parallel.memory_plan = WithEvaluation(m->parallel.memory_plan, evaluation);
}

}  // namespace lockstep
