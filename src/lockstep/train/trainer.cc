// Single-machine training loop.
#include "lockstep/train/trainer.h"

#include <omp.h>

#include <chrono>
#include <memory>
#include <optional>

#include "lockstep/comm/gloo_communicator.h"
#include "lockstep/core/net.h"
#include "lockstep/data/batch_reader.h"
#include "lockstep/data/batch_source.h"
#include "lockstep/data/db_source.h"
#include "lockstep/data/image.h"
#include "lockstep/model/layers.h"
#include "lockstep/model/mixed_precision.h"
#include "lockstep/model/optimizer.h"
#include "lockstep/model/zoo.h"
#include "lockstep/parallel/data_parallel.h"
#include "lockstep/parallel/fingerprint.h"
#include "lockstep/parallel/micro_batches.h"
#include "lockstep/parallel/placement.h"
#include "lockstep/train/checkpoint.h"
#include "lockstep/train/csv_log.h"
#include "lockstep/train/evaluate.h"
#include "lockstep/train/progress.h"

namespace lockstep {

namespace {

constexpr const char* kData = "data";
constexpr const char* kLabel = "label";
constexpr const char* kTrainReader = "train_reader";

struct Models {
  ModelHelper train{"train"};
  ModelHelper test{"test", /*init_params=*/false};
  DataParallelModel parallel;
  // Replica 0's figures, as the log reports them (one blob per micro-batch); the loss is the unscaled one.
  std::vector<std::string> train_loss, train_accuracy;
  std::string lr;
  std::vector<TestReplica> test_replicas;  // one per replica, in test mode, each on its replica's parameters
};

int Replicas(const TrainerConfig& c) { return c.num_devices / c.model_parallel; }

DataType ComputeType(const TrainerConfig& c) {
  if (c.dtype == "float16") return DataType::kFloat16;
  if (c.dtype == "bfloat16") return DataType::kBFloat16;
  return DataType::kFloat;
}

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

void BuildModels(const TrainerConfig& config, std::shared_ptr<Communicator> communicator, Models* m) {
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
  options.communicator = std::move(communicator);
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
      const int64_t batch = config.batch_size / Replicas(config) / config.micro_batches;
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
    UnscaleGradients(model, loss_scale_factor);
    lrs.push_back(AddMomentumSgd(model, sgd).lr);
  };
  options.combine_spatial_bn = config.combine_spatial_bn;
  options.optimize_gradient_memory = config.optimize_gradient_memory;
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
  *m->test.net().mutable_arg() = m->train.net().arg();
  if (config.device_type == DeviceType::kCuda) SetGpuOptions(config, &m->test.net());
}

std::unique_ptr<BatchSource> MakeSource(const std::string& name, const TrainerConfig& config, bool train) {
  if (name == "null")
    return std::make_unique<SyntheticSource>(config.num_channels, config.image_size, config.num_labels,
                                             config.seed);
  if (name == "fashion-mnist") {
    auto dataset = std::make_shared<ImageDataset>(LoadFashionMnist(train));
    return std::make_unique<DatasetSource>(dataset, train, config.seed);
  }
  DbSourceOptions options;
  options.db_type = config.db_type;
  options.format = ParseRecordFormat(config.record_format);
  options.channels = config.num_channels;
  options.num_labels = config.num_labels;
  options.transform.scale = std::max(config.scale, config.image_size);
  options.transform.crop = config.image_size;
  options.transform.random_crop = train;
  options.transform.mirror = train;
  options.transform.mean = {128.0f};
  options.transform.std = {128.0f};
  options.transform.color_order = ParseColorOrder(config.color_order);
  options.decode_threads = config.decode_threads;
  options.skip_bad_records = config.skip_bad_records;
  options.seed = config.seed;
  return std::make_unique<DbSource>(name, options);
}

bool IsDatabase(const std::string& name) { return name != "null" && name != "fashion-mnist"; }

int64_t Skipped(const BatchSource* source) {
  auto* db = dynamic_cast<const DbSource*>(source);
  return db ? db->skipped() : 0;
}

// Fill ops get distinct, reproducible seeds derived from the run's seed.
void SeedInitNet(NetDef* init, uint64_t seed) {
  for (int i = 0; i < init->op_size(); ++i)
    init->mutable_op(i)->mutable_device_option()->set_random_seed(static_cast<uint32_t>(seed * 1000003u + i));
}

float ScalarOf(const Workspace& ws, const std::string& name) {
  const Tensor& blob = ws.Blob(name);
  if (blob.on_host()) return blob.data<float>()[0];
  Tensor host;  // a GPU's scalar: the copy waits for the step that wrote it
  host.CopyFrom(blob);
  return host.data<float>()[0];
}

// The mean over micro-batches of equal size.
float MeanOf(const Workspace& ws, const std::vector<std::string>& names) {
  float sum = 0;
  for (const auto& name : names) sum += ScalarOf(ws, name);
  return sum / static_cast<float>(names.size());
}

}  // namespace

void ValidateTrainerConfig(const TrainerConfig& c) {
  auto fail = [](const std::string& message) { throw InvalidInput(message); };
  if (!IsKnownModel(c.model))
    fail(fmt::format("unknown --model '{}'; choose one of: {}", c.model, KnownModelsText()));
  if (c.train_data.empty())
    fail("--train_data is required: a database path, fashion-mnist, or null for synthetic data");
  if (c.db_type != "lmdb" && c.db_type != "leveldb")
    fail(fmt::format("--db_type '{}': use lmdb or leveldb", c.db_type));
  ParseColorOrder(c.color_order);
  if (c.decode_threads < 1)
    fail(fmt::format("--decode_threads must be at least 1, got {}", c.decode_threads));
  if (c.prefetch < 0) fail(fmt::format("--prefetch must be >= 0, got {}", c.prefetch));
  if (c.scale < 0) fail(fmt::format("--scale must be >= 0, got {}", c.scale));
  if (c.num_devices < 1) fail(fmt::format("--num_gpus must be at least 1, got {}", c.num_devices));
  if (c.batch_size <= 0) fail(fmt::format("--batch_size must be positive, got {}", c.batch_size));
  if (c.model_parallel < 1 || c.num_devices % c.model_parallel != 0)
    fail(
        fmt::format("--num_gpus {} does not divide into replicas of --model_parallel {} devices; use a "
                    "multiple of it",
                    c.num_devices, c.model_parallel));
  if (c.micro_batches < 1) fail(fmt::format("--micro_batches must be at least 1, got {}", c.micro_batches));
  const int replicas = c.num_devices / std::max(c.model_parallel, 1);
  if (c.batch_size % (replicas * c.micro_batches) != 0)
    fail(fmt::format(
        "--batch_size {} does not divide evenly among {} replicas x {} micro-batches; use a multiple of {}",
        c.batch_size, replicas, c.micro_batches, replicas * c.micro_batches));
  if (c.num_epochs <= 0) fail(fmt::format("--num_epochs must be positive, got {}", c.num_epochs));
  if (c.epoch_size < 0) fail(fmt::format("--epoch_size must be positive, got {}", c.epoch_size));
  if (c.base_learning_rate <= 0)
    fail(fmt::format("--base_learning_rate must be positive, got {}", c.base_learning_rate));
  if (c.momentum < 0 || c.momentum >= 1)
    fail(fmt::format("--momentum must be in [0, 1), got {}", c.momentum));
  if (c.weight_decay < 0) fail(fmt::format("--weight_decay must be >= 0, got {}", c.weight_decay));
  if (c.num_channels <= 0 || c.image_size <= 0 || c.num_labels <= 1)
    fail("--num_channels, --image_size must be positive and --num_labels at least 2");
  if (c.threads < 0) fail(fmt::format("--threads must be >= 0, got {}", c.threads));
  if (c.num_shards < 1) fail(fmt::format("--num_shards must be at least 1, got {}", c.num_shards));
  if (c.shard_id < 0 || c.shard_id >= c.num_shards)
    fail(fmt::format("--shard_id {} must be in [0, --num_shards {})", c.shard_id, c.num_shards));
  if (c.timeout <= 0 || c.first_iter_timeout <= 0)
    fail(fmt::format("--timeout ({}) and --first_iter_timeout ({}) must be positive seconds", c.timeout,
                     c.first_iter_timeout));
  if (c.dtype != "float" && c.dtype != "float16" && c.dtype != "bfloat16")
    fail(fmt::format("--dtype '{}': use float, float16 or bfloat16", c.dtype));
  if (c.float16_compute && c.dtype != "float16") fail("--float16_compute needs --dtype float16");
  if (c.loss_scale < 0)
    fail(fmt::format("--loss_scale must be >= 0 (0 picks the default), got {}", c.loss_scale));
  if (c.num_shards > 1 && c.run_id.empty())
    fail(
        "--run_id is required with --num_shards > 1: pass the same unique id (e.g. from uuidgen) to every "
        "shard");
}

namespace {

std::chrono::milliseconds Milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// A multi-machine run opens its network devices (so a bad flag fails before any shard waits), meets the other
// shards and connects to them; a single machine needs none of it.
std::shared_ptr<GlooCommunicator> OpenNetwork(const TrainerConfig& c) {
  if (c.num_shards == 1) return nullptr;
  GlooOptions gloo;
  gloo.transport = c.distributed_transport;
  gloo.interfaces = c.distributed_interfaces;
  gloo.algorithm = c.allreduce_algorithm;
  gloo.timeout = Milliseconds(c.timeout);
  gloo.first_iter_timeout = Milliseconds(c.first_iter_timeout);
  return std::make_shared<GlooCommunicator>(gloo, c.num_shards);
}

std::shared_ptr<Rendezvous> MeetShards(const TrainerConfig& c) {
  if (c.num_shards == 1) return nullptr;
  RendezvousOptions meet;
  meet.num_shards = c.num_shards;
  meet.shard_id = c.shard_id;
  meet.run_id = c.run_id;
  meet.redis_host = c.redis_host;
  meet.redis_port = c.redis_port;
  meet.file_store_path = c.file_store_path;
  meet.timeout = Milliseconds(c.first_iter_timeout);
  return std::make_shared<Rendezvous>(meet);
}

// Every shard must run the same model with the same hyper-parameters.
Fingerprint TrainingFingerprint(const TrainerConfig& c, const Models& m) {
  Fingerprint fingerprint = ModelFingerprint(m.train, m.parallel);
  const std::pair<const char*, std::string> flags[] = {
      {"--model", c.model},
      {"--batch_size", std::to_string(c.batch_size)},
      {"--epoch_size", std::to_string(c.epoch_size)},
      {"--num_epochs", std::to_string(c.num_epochs)},
      {"--base_learning_rate", fmt::format("{}", c.base_learning_rate)},
      {"--momentum", fmt::format("{}", c.momentum)},
      {"--nesterov", std::to_string(c.nesterov)},
      {"--weight_decay", fmt::format("{}", c.weight_decay)},
      {"--combine_spatial_bn", std::to_string(c.combine_spatial_bn)},
      {"--model_parallel", std::to_string(c.model_parallel)},
      {"--micro_batches", std::to_string(c.micro_batches)},
      {"--dtype", c.dtype},
      {"--loss_scale", fmt::format("{}", LossScale(c))},
      {"--seed", std::to_string(c.seed)},
      {"--train_data", c.train_data},
      {"--allreduce_algorithm", c.allreduce_algorithm},
      {"--distributed_interfaces", std::to_string(c.distributed_interfaces.size()) + " interfaces"}};
  for (const auto& [flag, value] : flags) fingerprint.emplace_back(flag, value);
  return fingerprint;
}

TrainerResult TrainShard(const TrainerConfig& config, std::shared_ptr<GlooCommunicator> gloo,
                         Rendezvous* rendezvous) {
  std::shared_ptr<BatchSource> train_source = MakeSource(config.train_data, config, true);
  std::unique_ptr<BatchSource> test_source;
  if (!config.test_data.empty()) test_source = MakeSource(config.test_data, config, false);

  // --batch_size is per machine; a step of the job trains on the batches of every shard.
  const int64_t global_batch = int64_t{config.batch_size} * config.num_shards;
  const int64_t epoch_size = config.epoch_size > 0 ? config.epoch_size : train_source->size();
  const int64_t iterations = epoch_size / global_batch;
  if (iterations == 0)
    throw InvalidInput(
        fmt::format("--epoch_size {} is smaller than the global batch {} (--batch_size x --num_shards): an "
                    "epoch would have "
                    "no step",
                    epoch_size, global_batch));

  Models models;
  BuildModels(config, gloo, &models);
  if (rendezvous) AgreeOnModel(rendezvous, TrainingFingerprint(config, models));
  Workspace ws;
  models.parallel.Install(&ws);
  const int replicas = Replicas(config) * config.num_shards;
  auto reader = std::make_shared<BatchReader>(train_source, config.batch_size / Replicas(config), replicas,
                                              IsDatabase(config.train_data) ? config.prefetch : 0);
  ws.SetObject(kTrainReader, reader);
  SeedInitNet(&models.train.param_init_net(), config.seed);
  ws.RunNetOnce(models.train.param_init_net());
  const std::string& scope = models.parallel.scopes[0];

  TrainerState state;
  state.model = config.model;
  state.seed = config.seed;
  if (!config.load_model_path.empty()) {
    state = LoadCheckpoint(config.load_model_path, &ws, scope, models.parallel.state_blobs);
    if (state.model != config.model)
      throw InvalidInput(fmt::format("checkpoint {} was saved from model '{}', not --model {}",
                                     config.load_model_path, state.model, config.model));
    if (state.seed != config.seed)
      throw InvalidInput(fmt::format("checkpoint {} was saved with --seed {}; pass the same seed to resume",
                                     config.load_model_path, state.seed));
    if (state.epochs_done >= config.num_epochs)
      throw InvalidInput(
          fmt::format("checkpoint {} already has {} epochs; raise --num_epochs to train further",
                      config.load_model_path, state.epochs_done));
    ws.RunNetOnce(models.parallel.broadcast_net);  // shard 0's device 0 is the reference
  }

  reader->Seek(state.reader_position);
  Net* train_net = ws.CreateNet(models.train.net());
  Net* test_net = test_source ? ws.CreateNet(models.test.net()) : nullptr;

  std::string log_name = CsvLog::FileName(config.model, config.num_devices, config.batch_size,
                                          config.num_labels, config.base_learning_rate);
  if (config.shard_id > 0)  // shards may share a log directory; shard 0's log keeps the plain name
    log_name.insert(log_name.size() - 4, fmt::format("_shard{}", config.shard_id));
  CsvLog log(config.log_dir, log_name, config.arguments);
  ProgressLine progress(config.progress);
  TrainerResult result;
  result.log_path = log.path();
  EpochRecord record;
  record.cumulative_batch_count = state.iteration;
  record.cumulative_input_count = state.images_trained / config.num_shards;  // this machine's share
  record.cumulative_time_spent = state.training_milliseconds / 1000.0;
  using Clock = std::chrono::steady_clock;

  const int64_t first_epoch = state.epochs_done;
  for (int64_t epoch = state.epochs_done; epoch < config.num_epochs; ++epoch) {
    auto start = Clock::now();
    for (int64_t i = 0; i < iterations; ++i) {
      train_net->Run();
      if (gloo && i == 0 && epoch == first_epoch) gloo->EndFirstIteration();
      state.reader_position += global_batch;
      ++state.iteration;
      double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      progress.Update(epoch + 1, config.num_epochs, i + 1, iterations, (i + 1) * config.batch_size / seconds,
                      MeanOf(ws, models.train_loss));
    }
    progress.Finish();
    record.time_spent = std::chrono::duration<double>(Clock::now() - start).count();
    record.cumulative_time_spent += record.time_spent;
    record.input_count = iterations * config.batch_size;
    record.cumulative_input_count += record.input_count;
    record.cumulative_batch_count += iterations;
    record.accuracy = MeanOf(ws, models.train_accuracy);
    record.loss = MeanOf(ws, models.train_loss);
    record.learning_rate = ScalarOf(ws, models.lr);
    record.epoch = epoch + 1;
    record.test_accuracy =
        test_net ? Evaluate(&ws, test_net, models.test_replicas, test_source.get(), config.batch_size).top1()
                 : -1;
    log.Append(record);
    fmt::print(
        "epoch {}/{}: {:.1f} s, {:.1f} img/s, loss {:.4f}, train accuracy {:.4f}, test accuracy {:.4f}\n",
        epoch + 1, config.num_epochs, record.time_spent, record.input_count / record.time_spent, record.loss,
        record.accuracy, record.test_accuracy);
    for (const BatchSource* source : {train_source.get(), test_source.get()})
      if (Skipped(source) > 0)
        fmt::print("skipped {} bad records of {} so far (--skip_bad_records)\n", Skipped(source),
                   dynamic_cast<const DbSource*>(source)->name());
    std::fflush(stdout);
    state.epochs_done = epoch + 1;
    state.images_trained += record.input_count * config.num_shards;
    state.training_milliseconds = static_cast<int64_t>(record.cumulative_time_spent * 1000);
    if (!config.save_model_name.empty() && config.shard_id == 0) {
      std::string path = CheckpointPath(config.file_store_path, config.save_model_name, state.epochs_done);
      SaveCheckpoint(path, ws, scope, models.parallel.state_blobs, state);
      fmt::print("saved checkpoint {}\n", path);
      std::fflush(stdout);
    }
    result.last_test_accuracy = record.test_accuracy;
    result.last_loss = record.loss;
  }
  if (gloo) gloo->Close();
  return result;
}

}  // namespace

TrainerResult Train(const TrainerConfig& config) {
  ValidateTrainerConfig(config);
  if (config.threads > 0) omp_set_num_threads(config.threads);
  std::shared_ptr<GlooCommunicator> gloo = OpenNetwork(config);
  std::shared_ptr<Rendezvous> rendezvous = MeetShards(config);
  try {
    if (gloo) {
      gloo->Connect(rendezvous);
      fmt::print("shard {} of {}: joined {}\n", config.shard_id, config.num_shards,
                 rendezvous->description());
      std::fflush(stdout);
    }
    return TrainShard(config, gloo, rendezvous.get());
  } catch (const Error& e) {
    // The other shards name this shard and its error instead of only seeing it vanish.
    if (rendezvous) rendezvous->ReportFailure(-1, e.what());
    throw;
  }
}

EvaluationResult EvaluateCheckpoint(const TrainerConfig& config, const std::string& predictions_path) {
  if (config.load_model_path.empty())
    throw InvalidInput("--load_model_path is required: the checkpoint to evaluate");
  if (config.test_data.empty() || config.test_data == "null")
    throw InvalidInput("--test_data is required: a database path or fashion-mnist");
  TrainerConfig as_training = config;  // evaluation needs of the flags what training on the test data needs
  as_training.train_data = config.test_data;
  ValidateTrainerConfig(as_training);
  if (config.threads > 0) omp_set_num_threads(config.threads);
  std::unique_ptr<BatchSource> source = MakeSource(config.test_data, config, false);

  // The trainer's model on the same devices, its parameters from the checkpoint on device 0 and broadcast;
  // the training net is never created, so nothing trains and nothing is written back.
  Models models;
  BuildModels(config, nullptr, &models);
  Workspace ws;
  models.parallel.Install(&ws);
  ws.RunNetOnce(models.train.param_init_net());
  const std::string& scope = models.parallel.scopes[0];
  std::vector<std::string> names;
  for (const std::string& name : models.test.GetParams(scope)) names.push_back(name.substr(scope.size()));
  LoadCheckpointParameters(config.load_model_path, config.model, &ws, scope, names);
  ws.RunNetOnce(models.parallel.broadcast_net);
  Net* test_net = ws.CreateNet(models.test.net());

  std::optional<PredictionsCsv> predictions;
  if (!predictions_path.empty()) predictions.emplace(predictions_path);
  EvaluationResult result = Evaluate(&ws, test_net, models.test_replicas, source.get(), config.batch_size,
                                     [&](const RecordPrediction& prediction) {
                                       if (predictions)
                                         predictions->Append(source->KeyAt(prediction.position), prediction);
                                     });
  if (predictions) predictions->Commit();
  return result;
}

}  // namespace lockstep
