// Defaults that depend on the machine, the data and the launcher, and the checks of a whole configuration.
#include "lockstep/train/trainer_config.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>

#include "lockstep/comm/gloo_communicator.h"
#include "lockstep/comm/launcher.h"
#include "lockstep/comm/wire_dtype.h"
#include "lockstep/core/cpu_isa.h"
#include "lockstep/core/device_backend.h"
#include "lockstep/core/enforce.h"
#include "lockstep/data/open_batch_source.h"
#include "lockstep/data/source_options.h"
#include "lockstep/model/zoo.h"
#include "lockstep/train/checkpoint.h"
#include "lockstep/train/trainer_options.h"

namespace lockstep {

void ResolveDevices(const GivenOptions& given, TrainerConfig* c) {
  if (!c->use_cpu) c->device_type = DeviceType::kCuda;  // whether there are any is checked last
  if (given.count("gpus")) {
    std::vector<int> sorted = c->gpus;
    std::sort(sorted.begin(), sorted.end());
    if (sorted.empty()) throw InvalidInput("--gpus lists no device; name at least one, e.g. --gpus 0,1");
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      throw InvalidInput("--gpus takes distinct device ids, e.g. --gpus 0,1");
    if (!given.count("num_gpus")) c->num_devices = static_cast<int>(c->gpus.size());  // else they must agree
  }
}

namespace {

// fashion-mnist's images have one size, channel count and label count; other data takes the options'.
bool HasFixedGeometry(const std::string& data) { return data == "fashion-mnist"; }

}  // namespace

// The given geometry is checked before fashion-mnist's replaces it, which ValidateTrainerConfig no longer
// sees.
void ResolveDataDefaults(const std::string& data, const GivenOptions& given, TrainerConfig* c) {
  if (!HasFixedGeometry(data)) return;
  CheckSourceOptions(DataSpec(data, *c, true), c->batch_size, c->prefetch, given, "--");
  c->num_channels = kFashionMnistChannels;
  c->image_size = kFashionMnistImageSize;
  c->num_labels = kFashionMnistLabels;
  if (!given.count("epoch_size")) c->epoch_size = 0;  // one pass over its 60000 images
}

void ResolveModelFromCheckpoint(const GivenOptions& given, bool train, TrainerConfig* c) {
  // Train looks again (and says which it found); eval and export take no "latest".
  if (!train && c->load_model_path == "latest")
    throw InvalidInput(
        "--load_model_path latest finds where training resumes; name the checkpoint file here (e.g. "
        "m_3.safetensors)");
  const std::string path = train && c->load_model_path == "latest"
                               ? LatestCheckpoint(c->file_store_path, c->save_model_name)
                               : c->load_model_path;
  if (path.empty()) return;
  const ModelDescription saved = ReadModelDescription(path);
  if (!saved.name.empty()) {
    if (given.count("model") && c->model != saved.name)
      throw InvalidInput(
          fmt::format("--model {0} contradicts the checkpoint {1}, which holds {2}; drop --model or load a "
                      "{0} checkpoint",
                      c->model, path, saved.name));
    c->model = saved.name;
  }
  const std::string& data = train ? c->train_data : c->test_data;
  const std::string scaling = InputScaling(data);
  if (!saved.input_scaling.empty() && !scaling.empty() && saved.input_scaling != scaling)
    throw InvalidInput(
        fmt::format("{} {} is read as {}, but the checkpoint {} was trained on images read as {}: give data "
                    "read the same way",
                    train ? "--train_data" : "--test_data", data, scaling, path, saved.input_scaling));
  if (!saved.color_order.empty() && IsDatabase(data)) {
    if (given.count("color_order") && c->color_order != saved.color_order)
      throw InvalidInput(
          fmt::format("--color_order {0} contradicts the checkpoint {1}, trained on {2} images; drop "
                      "--color_order or pass "
                      "{2}",
                      c->color_order, path, saved.color_order));
    c->color_order = saved.color_order;
  }
  for (const auto& [name, field] : kModelGeometry) {
    const int recorded = saved.*field;
    if (recorded == 0 || (HasFixedGeometry(data) && std::string(name) == "scale")) continue;  // not resized
    int& value = c->*std::get<int TrainerConfig::*>(FindTrainerOption(name).member);
    // A --scale below --image_size resizes to --image_size (after it, in kModelGeometry's order), as
    // checkpoints record it.
    const int effective =
        std::string(name) == "scale" ? static_cast<int>(ResizedSide(value, c->image_size)) : value;
    if (given.count(name) && effective != recorded)
      throw InvalidInput(
          fmt::format("--{0} {1} contradicts the checkpoint {2}, which holds {3}; drop --{0} or load a "
                      "checkpoint of --{0} {1}",
                      name, value, path, recorded));
    if (HasFixedGeometry(data) && value != recorded)
      throw InvalidInput(fmt::format(
          "{} {} has --{} {} but the checkpoint {} holds {}; give data of the checkpoint's geometry",
          train ? "--train_data" : "--test_data", data, name, value, path, recorded));
    value = recorded;
  }
}

void CheckModelAgainstCheckpoint(const TrainerConfig& config, bool train) {
  GivenOptions every = {"model"};
  for (const GeometryField& geometry : kModelGeometry) every.insert(geometry.name);
  TrainerConfig checked = config;
  ResolveModelFromCheckpoint(every, train, &checked);
}

namespace {

// mpirun and srun say which shard a process is.
void ResolveLauncher(const GivenOptions& given, TrainerConfig* c) {
  std::optional<LauncherShards> launcher = ShardsFromLauncher();
  if (!launcher) return;
  const std::pair<const char*, int*> flags[] = {{"num_shards", &c->num_shards}, {"shard_id", &c->shard_id}};
  const int values[] = {launcher->num_shards, launcher->shard_id};
  for (int i = 0; i < 2; ++i) {
    if (given.count(flags[i].first) && *flags[i].second != values[i])
      throw InvalidInput(fmt::format("--{} {} contradicts {}, which gives {}; drop the flag", flags[i].first,
                                     *flags[i].second, launcher->launcher, values[i]));
    *flags[i].second = values[i];
  }
  if (c->run_id.empty()) c->run_id = launcher->job_id;
}

}  // namespace

void ResolveTrainerConfig(const GivenOptions& given, TrainerConfig* c) {
  ResolveDevices(given, c);
  ResolveDataDefaults(c->train_data, given, c);
  ResolveModelFromCheckpoint(given, /*train=*/true, c);
  ResolveLauncher(given, c);
  c->allreduce_channels = AllreduceChannels(*c);
  ValidateTrainerConfig(*c);
}

// Two channels in flight pay off across shards; CUDA collectives use one communicator.
int AllreduceChannels(const TrainerConfig& c) {
  if (c.allreduce_channels > 0) return c.allreduce_channels;
  return c.num_shards > 1 && c.device_type == DeviceType::kCpu ? 2 : 1;
}

int64_t LimitStepsPerEpoch(int64_t iterations) {
  const char* text = std::getenv("LOCKSTEP_MAX_STEPS");
  if (!text || !*text) return iterations;
  int64_t limit = 0;
  const char* end = text + std::strlen(text);
  auto [stop, error] = std::from_chars(text, end, limit);
  if (error != std::errc() || stop != end || limit < 1)
    throw InvalidInput(fmt::format(
        "LOCKSTEP_MAX_STEPS '{}': use a positive number of steps per epoch, or unset it to train full epochs",
        text));
  if (limit >= iterations) return iterations;
  fmt::print("LOCKSTEP_MAX_STEPS={}: {} steps per epoch instead of {}\n", limit, limit, iterations);
  std::fflush(stdout);
  return limit;
}

namespace {

void CheckDataExists(const char* flag, const std::string& data) {
  std::error_code error;
  if (!data.empty() && IsDatabase(data) && !std::filesystem::exists(data, error))
    throw InvalidInput(
        fmt::format("{} '{}' does not exist: give an image database (a folder lockstep make-db wrote), "
                    "fashion-mnist, or null for synthetic data",
                    flag, data));
}

void CheckData(const TrainerConfig& c) {
  if (c.train_data.empty())
    throw InvalidInput(
        "--train_data is required: a database path, fashion-mnist, or null for synthetic data");
  if (c.test_data == "null") throw InvalidInput("--test_data null: give a database path or fashion-mnist");
  if (c.train_data == "null" && c.epoch_size == 0)
    throw InvalidInput(
        "--epoch_size 0 asks for one pass over the data, but --train_data null never ends: give the images "
        "an epoch has");
  CheckDataExists("--train_data", c.train_data);
  CheckDataExists("--test_data", c.test_data);
  if (c.test_data == "fashion-mnist" && c.train_data != "fashion-mnist")
    throw InvalidInput("--test_data fashion-mnist needs --train_data fashion-mnist (same input geometry)");
  if (c.db_type == "leveldb" && IsDatabase(c.train_data) && c.test_data == c.train_data)
    throw InvalidInput(
        fmt::format("--train_data and --test_data are one LevelDB ({}), which opens once at a time; test on "
                    "a copy of it, or on an LMDB (lockstep make-db --db lmdb)",
                    c.train_data));
  const std::string train_scaling = InputScaling(c.train_data), test_scaling = InputScaling(c.test_data);
  if (!train_scaling.empty() && !test_scaling.empty() && train_scaling != test_scaling)
    throw InvalidInput(fmt::format(
        "--train_data {} is read as {} but --test_data {} as {}: the model would score wrongly on it; test "
        "on data read as its training data is (for an image database of the same images: lockstep make-db)",
        c.train_data, train_scaling, c.test_data, test_scaling));
  // --test_data shares every option but its name.
  CheckSourceOptions(DataSpec(c.train_data, c, true), c.batch_size, c.prefetch, {}, "--");
}

// Replicas of model_parallel devices each, every one's batch split into micro-batches.
void CheckDeviceSplit(const TrainerConfig& c) {
  if (!c.gpus.empty() && static_cast<int>(c.gpus.size()) != c.num_devices)  // a configuration built in code
    throw InvalidInput(fmt::format("--gpus lists {} devices but --num_gpus is {}; give one of them",
                                   c.gpus.size(), c.num_devices));
  if (c.num_devices % c.model_parallel != 0)
    throw InvalidInput(fmt::format(
        "--num_gpus {} does not divide into replicas of --model_parallel {} devices; use a multiple of it",
        c.num_devices, c.model_parallel));
  const int replicas = c.num_devices / c.model_parallel;
  if (c.batch_size % (replicas * c.micro_batches) != 0)
    throw InvalidInput(
        fmt::format("--batch_size {} does not divide evenly among {} replica{}{}; use a multiple of {}",
                    c.batch_size, replicas, replicas == 1 ? "" : "s",
                    c.micro_batches == 1 ? "" : fmt::format(" x {} micro-batches", c.micro_batches),
                    replicas * c.micro_batches));
}

void CheckPrecision(const TrainerConfig& c) {
  const DataType dtype = ParseFloatType(c.dtype, "--dtype");
  if (c.device_type == DeviceType::kCpu &&
      (dtype == DataType::kFloat16 || c.float16_compute || c.enable_tensor_core))
    throw InvalidInput(
        "--dtype float16, --float16_compute and --enable_tensor_core need a GPU; CPUs train in float or "
        "bfloat16");
  if (c.device_type == DeviceType::kCpu && dtype == DataType::kBFloat16)
    RequireCpuBFloat16("--dtype bfloat16 on CPU");
  if (c.float16_compute && dtype != DataType::kFloat16)
    throw InvalidInput("--float16_compute needs --dtype float16");
}

void CheckShards(const TrainerConfig& c) {
  if (c.shard_id >= c.num_shards)
    throw InvalidInput(fmt::format("--shard_id {}: must be below --num_shards {}; accepted range [0, {}]",
                                   c.shard_id, c.num_shards, c.num_shards - 1));
  if (c.num_shards > 1 && c.run_id.empty())
    throw InvalidInput(
        "--run_id is required with --num_shards > 1: pass the same unique id (e.g. $(date +%s)) to every "
        "shard");
  CheckAllreduceAlgorithm(c.allreduce_algorithm, c.num_shards,
                          ParseFloatType(c.allreduce_dtype, "--allreduce_dtype"));
}

void CheckCheckpoints(const TrainerConfig& c) {
  // A path here would be joined under --file_store_path and fail only when the first epoch ends.
  if (c.save_model_name.find('/') != std::string::npos || c.save_model_name == "." ||
      c.save_model_name == "..")
    throw InvalidInput(
        fmt::format("--save_model_name '{}' is a path, not a name: checkpoints go to "
                    "{{file_store_path}}/{{save_model_name}}_{{epoch}}.safetensors; pass the folder as "
                    "--file_store_path and a name without '/'",
                    c.save_model_name));
  if (c.checkpoint_every_iters > 0 && c.save_model_name.empty())
    throw InvalidInput(
        "--checkpoint_every_iters needs --save_model_name: the name of the checkpoints to write");
  if (c.load_model_path == "latest" && c.save_model_name.empty())
    throw InvalidInput(
        "--load_model_path latest needs --save_model_name: the name of the checkpoints to look for");
}

void CheckTensorBoard(const TrainerConfig& c) {
  if (c.tensorboard_shard0_only && c.tensorboard_dir.empty())
    throw InvalidInput("--tensorboard_shard0_only needs --tensorboard_dir: the folder of the event files");
}

}  // namespace

SourceSpec DataSpec(const std::string& name, const TrainerConfig& config, bool train) {
  SourceSpec spec;
  spec.name = name;
  spec.db_type = config.db_type;
  spec.record_format = config.record_format;
  spec.color_order = config.color_order;
  spec.channels = config.num_channels;
  spec.image_size = config.image_size;
  spec.num_labels = config.num_labels;
  spec.scale = config.scale;
  spec.train = train;
  spec.decode_threads = config.decode_threads;
  spec.skip_bad_records = config.skip_bad_records;
  spec.seed = config.seed;
  return spec;
}

TrainerConfig TrainingOnTestData(const TrainerConfig& config) {
  TrainerConfig as_training = config;
  as_training.train_data = config.test_data;
  as_training.test_data.clear();
  return as_training;
}

void CheckEvaluationData(const TrainerConfig& config) {
  CheckDataExists("--test_data", config.test_data);  // named as given, before training's check names it
  CheckData(TrainingOnTestData(config));
}

void ValidateTrainerConfig(const TrainerConfig& c) {
  if (!IsKnownModel(c.model))
    throw InvalidInput(fmt::format("unknown --model '{}'; choose one of: {}", c.model, KnownModelsText()));
  CheckOptionRanges(c);
  CheckData(c);
  CheckDeviceSplit(c);
  CheckPrecision(c);
  if (c.nesterov && c.momentum == 0)
    throw InvalidInput("--nesterov needs --momentum above 0 (without momentum it is plain SGD); drop one");
  CheckShards(c);
  CheckCheckpoints(c);
  CheckTensorBoard(c);
  // Last, so that a command missing a flag or given a bad value hears of that first.
  if (c.device_type == DeviceType::kCuda) {
    DeviceBackend* cuda = FindDeviceBackend(DeviceType::kCuda);
    if (!cuda) throw InvalidInput("this build has no CUDA backend: pass --use_cpu to run on CPU devices");
    if (cuda->DeviceCount() == 0)
      throw InvalidInput("this machine has no CUDA GPU (or no driver): pass --use_cpu to run on CPU devices");
  }
}

}  // namespace lockstep
