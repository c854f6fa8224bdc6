// Flags of the trainer, with the defaults of Caffe2's resnet50_trainer.
#include "train_command.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <utility>

#include "lockstep/comm/launcher.h"
#include "lockstep/core/device_backend.h"
#include "lockstep/core/enforce.h"
#include "lockstep/train/progress.h"

namespace lockstep {

void AddModelAndDataFlags(CLI::App* app, TrainerConfig* c, bool* use_cpu) {
  // A flag given twice takes its last value, so wrappers such as scripts/demo.sh can be overridden.
  app->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app->add_option("--model", c->model, "Network: lenet, resnet18, resnet34, resnet50, resnet101, wrn-D-K")
      ->capture_default_str();
  app->add_option("--db_type", c->db_type, "Database type of --train_data / --test_data: lmdb or leveldb")
      ->capture_default_str();
  app->add_option("--record_format", c->record_format,
                  "Record format in the database: auto, datum (Caffe) or tensorprotos (Caffe2)")
      ->capture_default_str();
  app->add_option("--color_order", c->color_order,
                  "Channel order of colour images as the network sees them: bgr (Caffe's and Caffe2's) or "
                  "rgb; raw records are taken to be stored BGR, as convert_imageset and make_image_db write "
                  "them, and encoded ones are decoded into the same order")
      ->capture_default_str();
  app->add_option("--scale", c->scale,
                  "Images are resized so their shortest side is this (at least --image_size), then cropped")
      ->capture_default_str();
  app->add_option("--decode_threads", c->decode_threads, "Threads that decode and augment database images")
      ->capture_default_str();
  app->add_option("--num_channels", c->num_channels, "Color channels of the input")->capture_default_str();
  app->add_option("--image_size", c->image_size, "Height and width of the input images")
      ->capture_default_str();
  app->add_option("--num_labels", c->num_labels, "Number of classes")->capture_default_str();
  app->add_option("--batch_size", c->batch_size, "Batch size, total over the machine's devices")
      ->capture_default_str();
  app->add_flag("--use_cpu", *use_cpu, "Run on CPU devices (without it: the GPUs of --gpus / --num_gpus)");
  app->add_option("--gpus", c->gpus, "Device ids, comma-separated (an alternative to --num_gpus)")
      ->delimiter(',');
  app->add_option("--num_gpus", c->num_devices,
                  "Number of devices (with --use_cpu: CPU devices, concurrent replicas that share --threads)")
      ->capture_default_str();
  app->add_option("--threads", c->threads,
                  "CPU threads for the kernels, divided among the devices (0: all cores)")
      ->capture_default_str();
}

void AddTrainFlags(CLI::App* app, TrainerConfig* c, bool* use_cpu) {
  AddModelAndDataFlags(app, c, use_cpu);
  app->add_option("--train_data", c->train_data,
                  "Training data: the path of an image database (LMDB or LevelDB of Caffe Datum or Caffe2 "
                  "TensorProtos records), fashion-mnist, or null for synthetic images")
      ->required();
  app->add_option(
      "--test_data", c->test_data,
      "Test data evaluated after each epoch: a database path like --train_data, or fashion-mnist");
  app->add_option("--prefetch", c->prefetch, "Batches each device's reader prepares ahead of the step")
      ->capture_default_str();
  app->add_flag(
      "--skip_bad_records", c->skip_bad_records,
      "Skip database records that do not parse or decode (counted on the console) instead of stopping");
  app->add_option("--dtype", c->dtype,
                  "Data type the GPU network computes in: float, float16 or bfloat16 (with float32 master "
                  "parameters; CPU training is float)")
      ->capture_default_str();
  app->add_flag("--float16_compute", c->float16_compute,
                "With --dtype float16: compute in float16 too (GPU)");
  app->add_flag("--enable_tensor_core", c->enable_tensor_core,
                "Use tensor cores where cuDNN offers them (GPU)");
  app->add_option("--loss_scale", c->loss_scale,
                  "Static loss scale of mixed precision (0: 128 for float16, 1 for bfloat16 and float)")
      ->capture_default_str();
  app->add_option("--cudnn_workspace_limit_mb", c->cudnn_workspace_limit_mb,
                  "Workspace cuDNN may use per convolution, in MB (GPU)")
      ->capture_default_str();
  app->add_option(
         "--model_parallel", c->model_parallel,
         "Split the model into this many stages of balanced cost, each on its own device: every replica "
         "spans this many devices (--num_gpus must be a multiple)")
      ->capture_default_str();
  app->add_option(
         "--micro_batches", c->micro_batches,
         "Pipeline each replica's batch as this many micro-batches: with --model_parallel, stage s runs "
         "micro-batch j while stage s+1 runs j-1; one update per batch")
      ->capture_default_str();
  app->add_flag("--combine_spatial_bn", c->combine_spatial_bn,
                "Batch normalization uses the statistics of all devices' batches, not each device's own");
  app->add_flag("--optimize_gradient_memory", c->optimize_gradient_memory,
                "Let gradient blobs share buffers (less memory, same results)");
  app->add_option("--epoch_size", c->epoch_size,
                  "Images per epoch (default: one pass over the training data, 1500000 for null data)");
  app->add_option("--num_epochs", c->num_epochs, "Number of epochs")->capture_default_str();
  app->add_option("--base_learning_rate", c->base_learning_rate, "Learning rate")->capture_default_str();
  app->add_option("--momentum", c->momentum, "SGD momentum (0 for plain SGD)")->capture_default_str();
  app->add_flag("--nesterov", c->nesterov, "Use Nesterov momentum");
  app->add_option("--weight_decay", c->weight_decay, "L2 weight decay on weights (not biases or BN)")
      ->capture_default_str();
  app->add_option("--seed", c->seed, "Seed of initialisation and data order")->capture_default_str();
  app->add_option(
      "--save_model_name", c->save_model_name,
      "Save a checkpoint {file_store_path}/{save_model_name}_{epoch}.safetensors after each epoch");
  app->add_option(
         "--file_store_path", c->file_store_path,
         "Directory for checkpoints; with --num_shards > 1 and no --redis_host also where the shards "
         "meet (a directory every shard can write, e.g. on NFS)")
      ->capture_default_str();
  app->add_option("--num_shards", c->num_shards,
                  "Number of machines (processes) in the run; default 1, or the launcher's (mpirun, srun)")
      ->capture_default_str();
  app->add_option("--shard_id", c->shard_id,
                  "This machine's index in [0, num_shards); default the launcher's")
      ->capture_default_str();
  app->add_option("--run_id", c->run_id,
                  "Unique run identifier (e.g. from uuidgen), the same on every shard; keys in the store are "
                  "prefixed with it. Default with srun/mpirun: the launcher's job id");
  app->add_option("--redis_host", c->redis_host, "Host of a Redis server where the shards meet");
  app->add_option("--redis_port", c->redis_port, "Port of that Redis server")->capture_default_str();
  app->add_option("--distributed_transport", c->distributed_transport,
                  "Transport between shards: tcp, or ibverbs on InfiniBand")
      ->capture_default_str();
  app->add_option(
         "--distributed_interfaces", c->distributed_interfaces,
         "Network interfaces (tcp) or InfiniBand devices to use, comma-separated; each carries a share "
         "of every collective (default: the address the host name resolves to)")
      ->delimiter(',');
  app->add_option(
         "--allreduce_algorithm", c->allreduce_algorithm,
         "Gloo allreduce across shards: auto (halving_doubling), ring, ring_chunked, halving_doubling, "
         "bcube (even shard counts)")
      ->capture_default_str();
  app->add_option("--timeout", c->timeout,
                  "Seconds a shard waits for the others in a collective after the first iteration; a dead or "
                  "stalled shard ends the run within it")
      ->capture_default_str();
  app->add_option("--first_iter_timeout", c->first_iter_timeout,
                  "Seconds a shard waits for the others to join, agree on the model and finish the first "
                  "iteration")
      ->capture_default_str();
  app->add_option("--load_model_path", c->load_model_path, "Resume from this checkpoint");
  app->add_option("--log_dir", c->log_dir, "Directory of the CSV log")->capture_default_str();
}

namespace {

// mpirun and srun say which shard a process is; explicit flags must agree with them.
void ApplyLauncher(const CLI::App& app, TrainerConfig* c) {
  std::optional<LauncherShards> launcher = ShardsFromLauncher();
  if (!launcher) return;
  const std::pair<const char*, int*> flags[] = {{"--num_shards", &c->num_shards},
                                                {"--shard_id", &c->shard_id}};
  const int values[] = {launcher->num_shards, launcher->shard_id};
  for (int i = 0; i < 2; ++i) {
    if (app.count(flags[i].first) && *flags[i].second != values[i])
      throw InvalidInput(fmt::format("{} {} contradicts {}, which gives {}; drop the flag", flags[i].first,
                                     *flags[i].second, launcher->launcher, values[i]));
    *flags[i].second = values[i];
  }
  if (c->run_id.empty()) c->run_id = launcher->job_id;
}

}  // namespace

void ResolveDevices(const CLI::App& app, bool use_cpu, TrainerConfig* c) {
  if (!use_cpu) {
    DeviceBackend* cuda = FindDeviceBackend(DeviceType::kCuda);
    if (!cuda) throw InvalidInput("this build has no CUDA backend: pass --use_cpu to run on CPU devices");
    if (cuda->DeviceCount() == 0)
      throw InvalidInput("this machine has no CUDA GPU (or no driver): pass --use_cpu to run on CPU devices");
    c->device_type = DeviceType::kCuda;
  }
  if (app.count("--gpus")) {
    std::vector<int> sorted = c->gpus;
    std::sort(sorted.begin(), sorted.end());
    if (sorted.empty() || sorted[0] < 0 || std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      throw InvalidInput("--gpus takes distinct device ids >= 0, e.g. --gpus 0,1");
    if (app.count("--num_gpus") && c->num_devices != static_cast<int>(c->gpus.size()))
      throw InvalidInput(fmt::format("--gpus lists {} devices but --num_gpus is {}; give one of them",
                                     c->gpus.size(), c->num_devices));
    c->num_devices = static_cast<int>(c->gpus.size());
  }
}

void ApplyFashionMnistGeometry(const CLI::App& app, TrainerConfig* c) {
  const std::pair<const char*, int*> geometry[] = {{"--num_channels", &c->num_channels},
                                                   {"--image_size", &c->image_size},
                                                   {"--num_labels", &c->num_labels}};
  const int expected[] = {1, 28, 10};
  for (int i = 0; i < 3; ++i) {
    if (app.count(geometry[i].first) && *geometry[i].second != expected[i])
      throw InvalidInput(fmt::format("{} {} does not match fashion-mnist ({}); drop the flag",
                                     geometry[i].first, *geometry[i].second, expected[i]));
    *geometry[i].second = expected[i];
  }
}

TrainerConfig ResolveTrainConfig(const CLI::App& app, TrainerConfig c, bool use_cpu,
                                 const std::string& arguments) {
  ResolveDevices(app, use_cpu, &c);
  if (use_cpu && (c.dtype != "float" || c.float16_compute || c.enable_tensor_core))
    throw InvalidInput(
        "--dtype float16, --float16_compute and --enable_tensor_core need a GPU; CPU training is float");
  if (c.train_data == "fashion-mnist") {
    ApplyFashionMnistGeometry(app, &c);
  } else if (!app.count("--epoch_size")) {
    c.epoch_size = 1500000;  // the seed's default for null data and databases
  }
  ApplyLauncher(app, &c);
  if (c.test_data == "null") throw InvalidInput("--test_data null: give a database path or fashion-mnist");
  if (c.test_data == "fashion-mnist" && c.train_data != "fashion-mnist")
    throw InvalidInput("--test_data fashion-mnist needs --train_data fashion-mnist (same input geometry)");
  if (app.count("--epoch_size") && c.epoch_size <= 0)
    throw InvalidInput(fmt::format("--epoch_size must be positive, got {}", c.epoch_size));
  c.arguments = arguments;
  c.progress = StderrIsTerminal();
  ValidateTrainerConfig(c);
  return c;
}

int RunTrain(const CLI::App& app, TrainerConfig config, bool use_cpu, const std::string& arguments) {
  TrainerResult result = Train(ResolveTrainConfig(app, std::move(config), use_cpu, arguments));
  fmt::print("log: {}\n", result.log_path);
  return 0;
}

int ReportErrors(const std::function<int()>& fn) {
  try {
    return fn();
  } catch (const Error& e) {
    std::fprintf(stderr, "lockstep: error: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lockstep: internal error: %s\n", e.what());
  }
  return 1;
}

}  // namespace lockstep
