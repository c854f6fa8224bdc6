// The configuration of a training or evaluation run, and its checks. Each field that users set is an option
// declared once in trainer_options.cc (flag name, help, accepted range, shard agreement).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "lockstep/core/schema.h"
#include "lockstep/core/seed.h"
#include "lockstep/core/tensor.h"
#include "lockstep/data/batch_reader.h"
#include "lockstep/data/open_batch_source.h"

namespace lockstep {

// --allreduce_channels' largest value; the trainer's stop vote takes the channel after it.
constexpr int kMaxAllreduceChannels = 64;

struct TrainerConfig {
  std::string model = "resnet50";
  std::string train_data;  // a database path, "fashion-mnist" or "null" (synthetic)
  std::string test_data;   // "" (none), a database path or "fashion-mnist"
  bool use_cpu = false;    // CPU devices; else CUDA GPUs (ResolveDevices sets device_type from it)
  std::vector<int> gpus;   // --gpus: device ids (CPU devices are numbered 0..num_devices-1)
  int num_devices = 1;     // CPU devices: concurrent replicas, each with threads / num_devices threads
  // The data options' defaults are SourceSpec's, which the CreateDB operator shares.
  int num_channels = SourceSpec{}.channels, image_size = SourceSpec{}.image_size,
      num_labels = SourceSpec{}.num_labels;
  // Image databases: records are resized (shortest side `scale`), cropped to image_size (random for training,
  // centre for test), mirrored at random for training and normalized with (x - 128) / 128, as Caffe2's
  // trainer. Colour reaches the network in color_order, "bgr" (Caffe's and Caffe2's) or "rgb", whether a
  // record is raw (stored BGR) or encoded.
  std::string db_type = SourceSpec{}.db_type, record_format = SourceSpec{}.record_format,
              color_order = SourceSpec{}.color_order;
  int scale = SourceSpec{}.scale, decode_threads = SourceSpec{}.decode_threads;
  int prefetch = BatchReader::kDefaultPrefetch;
  bool skip_bad_records = SourceSpec{}.skip_bad_records;
  // Model parallelism: each replica spans model_parallel devices (the model split into that many stages of
  // balanced cost) and pipelines its batch as micro_batches micro-batches.
  int model_parallel = 1, micro_batches = 1;
  int batch_size = 32;  // total over the machine's devices
  // Images per epoch over all shards; 0 = one pass over the training data. Caffe2's default;
  // ResolveDataDefaults makes it one pass for fashion-mnist unless set.
  int64_t epoch_size = 1500000;
  int num_epochs = 1;
  float base_learning_rate = 0.1f, weight_decay = 1e-4f, momentum = 0.9f;
  bool nesterov = false;
  // The rate is multiplied by lr_gamma every lr_step_epochs epochs, as Caffe2's trainer does (0.1 every 30);
  // lr_step_epochs 0 keeps it fixed.
  int lr_step_epochs = 30;
  float lr_gamma = 0.1f;
  bool combine_spatial_bn = false;        // BN statistics over all devices
  bool optimize_gradient_memory = false;  // accepted for Caffe2's scripts; sharing is share_buffers
  bool share_buffers = true;              // blobs with disjoint lifetimes share buffers (the memory plan)
  bool plan_memory = false;               // print the memory plan and exit
  double memory_limit_gb = 0;             // what the plan may use; 0: the machine's memory
  // Many machines: shards meet through Redis (redis_host) or the directory file_store_path, under run_id.
  int num_shards = 1, shard_id = 0;
  std::string run_id, redis_host;
  int redis_port = 6379;
  std::string distributed_transport = "tcp";
  std::vector<std::string> distributed_interfaces;
  std::string allreduce_algorithm = "auto";
  std::string allreduce_dtype = "float";  // ParallelOptions' allreduce_dtype: float, bfloat16 or float16
  // ParallelOptions' bucket_bytes, tail_bucket_bytes (in MiB) and allreduce_channels (0: 2 across shards
  // of CPU devices, else 1).
  double allreduce_bucket_mb = 8, allreduce_tail_bucket_mb = 1;
  int allreduce_channels = 0;                      // at most kMaxAllreduceChannels
  double timeout = 30, first_iter_timeout = 1200;  // seconds a shard waits for the others
  // CPU devices, or CUDA GPUs (the ids of `gpus`, else 0..num_devices-1).
  DeviceType device_type = DeviceType::kCpu;
  // Precision and the GPU's cuDNN options of the seed. dtype float16 (GPU) / bfloat16 (GPU, or CPU with
  // bfloat16 instructions) computes in 16 bits with float32 master parameters and a static loss scale (0: 128
  // for float16, else 1).
  std::string dtype = "float";
  bool float16_compute = false, enable_tensor_core = false;
  float loss_scale = 0;
  int cudnn_workspace_limit_mb = static_cast<int>(GpuOptions::kDefaultCudnnWorkspaceBytes >> 20);
  uint64_t seed = kDefaultSeed;
  int threads = 0;  // oneDNN threads; 0 = all cores
  // Checkpoints go to file_store_path (shard 0 writes them), which is also the file store of a multi-shard
  // run.
  std::string save_model_name, file_store_path = ".", load_model_path, log_dir = ".";
  // Mid-epoch checkpoints every checkpoint_every_iters optimizer steps (0 = none), the newest
  // keep_checkpoints of them kept (0 = all). load_model_path "latest": the newest checkpoint of
  // save_model_name, if any.
  int64_t checkpoint_every_iters = 0;
  int keep_checkpoints = 2;
  // Progress of long runs: every log_every_secs seconds or log_every_iters steps (0 = never), a line on
  // stderr when it is not a terminal, and a row of the CSV iter_log when one is named.
  double log_every_secs = 60;
  int64_t log_every_iters = 0;
  std::string iter_log;
  // TensorBoard event files (train/training_events.h): none when empty.
  std::string tensorboard_dir;
  bool tensorboard_shard0_only = false;
  std::string arguments;  // the command line, for the log's first line
};

// The options a user set explicitly, by name (e.g. "epoch_size"); defaults that depend on the data, the
// devices or the launcher give way to them.
using GivenOptions = std::set<std::string>;

// CUDA GPUs unless use_cpu (they must exist); the device count of an explicit gpus list.
void ResolveDevices(const GivenOptions& given, TrainerConfig* config);
// fashion-mnist fixes the input geometry (given values must match it: CheckSourceOptions) and defaults to one
// pass per epoch.
void ResolveDataDefaults(const std::string& data, const GivenOptions& given, TrainerConfig* config);
// With --load_model_path (for training, "latest" too: the checkpoint Train will resume from), the model and
// its geometry (--model, --num_channels, --image_size, --num_labels) that the checkpoint records, in place of
// the defaults: eval, resume and export build the network it holds. Throws InvalidInput in one line when a
// given option, or the fixed geometry of the data (--train_data with `train`, else --test_data), contradicts
// the checkpoint. What a checkpoint does not record (older ones have no geometry) stays as it was. Call it
// after ResolveDataDefaults.
void ResolveModelFromCheckpoint(const GivenOptions& given, bool train, TrainerConfig* config);
// The three above for training on config.train_data, the shard and run id that mpirun or srun give (given
// values must agree), the automatic values below, then ValidateTrainerConfig.
void ResolveTrainerConfig(const GivenOptions& given, TrainerConfig* config);
// ResolveModelFromCheckpoint's check for a configuration whose every option counts as given (Train and
// EvaluateCheckpoint, which may be handed one built in code): throws when its model or geometry is not the
// checkpoint's.
void CheckModelAgainstCheckpoint(const TrainerConfig& config, bool train);

// The configuration of training on config.test_data (and testing on nothing else): what evaluating or
// exporting with it needs of the flags is what that training would need.
TrainerConfig TrainingOnTestData(const TrainerConfig& config);
// What reading config.test_data to evaluate or export needs of it and of the data flags: that it exists,
// then what training on it would need (its input scaling is the training data's, the source options hold).
void CheckEvaluationData(const TrainerConfig& config);

// The gradient allreduces in flight across shards: --allreduce_channels, or for 0 (automatic) 2 across shards
// of CPU devices and else 1.
int AllreduceChannels(const TrainerConfig& config);

// LOCKSTEP_MAX_STEPS=N in the environment caps every epoch at N steps, to try a documented command quickly
// (the epochs, file names and logs are as without it). Returns `iterations`, or N when it is smaller and then
// says so on stdout; a value that is not a positive integer is refused.
int64_t LimitStepsPerEpoch(int64_t iterations);

// Every option within its accepted range, then the checks across options (the data source's options by
// CheckSourceOptions, as CreateDB checks its arguments); throws InvalidInput with a one-line message naming
// the flag when the configuration cannot train.
void ValidateTrainerConfig(const TrainerConfig& config);

// What opening `name` (--train_data, or --test_data with train false) needs of the configuration.
SourceSpec DataSpec(const std::string& name, const TrainerConfig& config, bool train);

}  // namespace lockstep
