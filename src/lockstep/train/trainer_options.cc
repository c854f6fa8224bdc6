// The table of the trainer's options, and setting, printing and range-checking them by name.
#include "lockstep/train/trainer_options.h"

#include <fmt/ranges.h>

#include <cerrno>
#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <type_traits>

#include "lockstep/core/enforce.h"
#include "lockstep/data/db.h"
#include "lockstep/data/source_options.h"

namespace lockstep {

namespace {

OptionRange Between(long double min, long double max) { return {min, max, false, false}; }
OptionRange Positive(long double max) { return {0, max, true, false}; }
constexpr OptionRange kNoRange{};
constexpr long double kMaxUint64 = 18446744073709551615.0L;
constexpr auto kNone = ShardAgreement::kNone;
constexpr auto kSame = ShardAgreement::kValue;
using C = TrainerConfig;  // keeps the table one row per option

// The ranges are generous: a value past them is a typo (or a unit mistake) rather than a setting, and is
// refused before any work instead of failing late or overflowing a count. Those of the data source's options
// are CheckSourceOptions' (source_options.h), which ValidateTrainerConfig calls too.
const std::vector<TrainerOption>& Table() {
  static const std::string db_type_help =
      fmt::format("Database type of the image databases read: {}", fmt::join(DbTypes(), " or "));
  static const std::vector<TrainerOption> table = {
      // The model, its data and the devices: shared by `lockstep train` and `lockstep eval`.
      {"model", &C::model,
       "Network: lenet, resnet18, resnet34, resnet50, resnet101, wrn-D-K (with --load_model_path: the "
       "checkpoint's)",
       kNoRange, kSame, true},
      {"db_type", &C::db_type, db_type_help.c_str(), kNoRange, kNone, true},
      {"record_format", &C::record_format,
       "Record format in the database: auto, datum (Caffe) or tensorprotos (Caffe2)", kNoRange, kNone, true},
      {"color_order", &C::color_order,
       "Channel order of colour images as the network sees them: bgr (Caffe's and Caffe2's) or rgb; raw "
       "records are taken to be stored BGR, as convert_imageset and make_image_db write them, and encoded "
       "ones are decoded into the same order",
       kNoRange, kNone, true},
      {"scale", &C::scale,
       "Images are resized so their shortest side is this (at least --image_size), then cropped",
       Between(0, kMaxImageSize), kNone, true},
      {"decode_threads", &C::decode_threads, "Threads that decode and augment database images",
       Between(1, kMaxDecodeThreads), kNone, true},
      {"num_channels", &C::num_channels, "Color channels of the input", Between(1, kMaxChannels), kNone,
       true},
      {"image_size", &C::image_size, "Height and width of the input images", Between(1, kMaxImageSize), kNone,
       true},
      {"num_labels", &C::num_labels, "Number of classes", Between(kMinLabels, kMaxLabels), kNone, true},
      {"batch_size", &C::batch_size, "Batch size, total over the machine's devices",
       Between(1, kMaxBatchSize), kSame, true},
      {"use_cpu", &C::use_cpu, "Run on CPU devices (without it: the GPUs of --gpus / --num_gpus)", kNoRange,
       kNone, true},
      {"gpus", &C::gpus, "Device ids, comma-separated (an alternative to --num_gpus)", Between(0, 1023),
       kNone, true},
      {"num_gpus", &C::num_devices,
       "Number of devices (with --use_cpu: CPU devices, concurrent replicas that share --threads)",
       Between(1, 1024), kNone, true},
      {"threads", &C::threads, "CPU threads for the kernels, divided among the devices (0: all cores)",
       Between(0, 4096), kNone, true},
      {"test_data", &C::test_data,
       "Test data: the path of an image database like --train_data, or fashion-mnist; train evaluates it "
       "after each epoch, eval evaluates every record once",
       kNoRange, kNone, true},
      {"load_model_path", &C::load_model_path,
       "A checkpoint (.safetensors) the trainer saved: train resumes from it, eval evaluates it (and only "
       "reads it). train --load_model_path latest resumes from the newest checkpoint of --save_model_name in "
       "--file_store_path, or starts fresh when there is none. The model and its --num_channels, "
       "--image_size and --num_labels are the checkpoint's; a flag that contradicts them is refused",
       kNoRange, kNone, true},

      // Training.
      {"train_data", &C::train_data,
       "Training data (required): the path of an image database (LMDB or LevelDB of Caffe Datum or Caffe2 "
       "TensorProtos records), fashion-mnist, or null for synthetic images",
       kNoRange, kSame, false},
      {"prefetch", &C::prefetch, "Batches each device's reader prepares ahead of the step",
       Between(0, kMaxPrefetch), kNone, false},
      {"skip_bad_records", &C::skip_bad_records,
       "Skip database records that do not parse or decode (counted on the console) instead of stopping; "
       "evaluation leaves them out",
       kNoRange, kNone, true},
      {"dtype", &C::dtype,
       "Data type the network computes in: float, float16 (GPU) or bfloat16 (GPU, or CPU with AVX512_BF16 or "
       "AMX), with float32 master parameters",
       kNoRange, kSame, false},
      {"float16_compute", &C::float16_compute, "With --dtype float16: compute in float16 too (GPU)", kNoRange,
       kNone, false},
      {"enable_tensor_core", &C::enable_tensor_core, "Use tensor cores where cuDNN offers them (GPU)",
       kNoRange, kNone, false},
      {"loss_scale", &C::loss_scale,
       "Static loss scale of mixed precision (0: 128 for float16, 1 for bfloat16 and float)",
       Between(0, 1 << 24), kSame, false},
      {"cudnn_workspace_limit_mb", &C::cudnn_workspace_limit_mb,
       "Workspace cuDNN may use per convolution, in MB (GPU; one buffer per device, reused by every "
       "convolution). Caffe2's default is 64; here 1024, since NCHW tensor-core algorithms need room to "
       "transpose: on an H100, ResNet-50 at batch 128 trains 2x faster in float16 and bfloat16 and 15% "
       "faster in float32 with it",
       Between(0, 1 << 20), kNone, false},
      {"model_parallel", &C::model_parallel,
       "Split the model into this many stages of balanced cost, each on its own device: every replica spans "
       "this many devices (--num_gpus must be a multiple)",
       Between(1, 1024), kSame, false},
      {"micro_batches", &C::micro_batches,
       "Pipeline each replica's batch as this many micro-batches: with --model_parallel, stage s runs "
       "micro-batch j while stage s+1 runs j-1; one update per batch",
       Between(1, 1 << 16), kSame, false},
      {"combine_spatial_bn", &C::combine_spatial_bn,
       "Batch normalization uses the statistics of the whole batch, over every device and shard, not each "
       "device's own",
       kNoRange, kSame, false},
      {"share_buffers", &C::share_buffers,
       "Blobs whose lifetimes do not overlap share buffers: activations, gradients and scratch, planned "
       "before the first step (the same results; --share_buffers=false gives each blob its own)",
       kNoRange, kNone, false},
      {"optimize_gradient_memory", &C::optimize_gradient_memory,
       "Accepted for Caffe2's scripts: buffers are shared by default (--share_buffers)", kNoRange, kNone,
       false},
      {"plan_memory", &C::plan_memory,
       "Print the memory plan (tensor memory per device, and the largest --batch_size within the limit) and "
       "exit without training",
       kNoRange, kNone, false},
      {"memory_limit_gb", &C::memory_limit_gb,
       "Memory the run may use, in GiB; a plan above it stops before the first step (0: the machine's "
       "memory)",
       Between(0, 1 << 20), kNone, false},
      {"epoch_size", &C::epoch_size,
       "Images per epoch over all shards; 0: one pass over the training data, the default with --train_data "
       "fashion-mnist",
       Between(0, 1LL << 40), kSame, false},
      {"num_epochs", &C::num_epochs,
       "Number of epochs (Caffe2's default is 1000; here 1, so that a command without it ends)",
       Between(1, 1000000), kSame, false},
      {"base_learning_rate", &C::base_learning_rate, "Learning rate", Positive(1000), kSame, false},
      {"momentum", &C::momentum, "SGD momentum (0 for plain SGD)", {0, 1, false, true}, kSame, false},
      {"nesterov", &C::nesterov, "Use Nesterov momentum", kNoRange, kSame, false},
      {"lr_step_epochs", &C::lr_step_epochs,
       "Multiply the learning rate by --lr_gamma every this many epochs, as Caffe2's resnet50_trainer does "
       "every 30 (0: a fixed rate)",
       Between(0, 1000000), kSame, false},
      {"lr_gamma",
       &C::lr_gamma,
       "The factor of each --lr_step_epochs step",
       {0, 1, true, false},
       kSame,
       false},
      {"weight_decay", &C::weight_decay, "L2 weight decay on weights (not biases or BN)", Between(0, 1),
       kSame, false},
      {"seed", &C::seed, "Seed of initialisation and data order", Between(0, kMaxUint64), kSame, false},
      {"save_model_name", &C::save_model_name,
       "Save a checkpoint {file_store_path}/{save_model_name}_{epoch}.safetensors after each epoch (Caffe2's "
       "default is resnet50_model; here none: a run writes checkpoints when given a name, which --model "
       "lenet or resnet18 would not want to be resnet50's)",
       kNoRange, kNone, false},
      {"checkpoint_every_iters", &C::checkpoint_every_iters,
       "Also save {save_model_name}_iter{iteration}.safetensors every this many optimizer steps within an "
       "epoch, written in the background (0: never; needs --save_model_name)",
       Between(0, 1LL << 40), kNone, false},
      {"keep_checkpoints", &C::keep_checkpoints,
       "Mid-epoch checkpoints to keep, the newest (0: all); the per-epoch ones are never removed",
       Between(0, 1000000), kNone, false},
      {"file_store_path", &C::file_store_path,
       "Directory for checkpoints, created if missing; with --num_shards > 1 and no --redis_host also where "
       "the shards meet (a directory every shard can write, e.g. on NFS, which must exist). Caffe2's default "
       "is /tmp; here the working directory, as for the log, since /tmp is neither kept nor shared",
       kNoRange, kNone, false},
      {"num_shards", &C::num_shards,
       "Number of machines (processes) in the run; default 1, or the launcher's (mpirun, srun)",
       Between(1, 65536), kNone, false},
      {"shard_id", &C::shard_id, "This machine's index in [0, num_shards); default the launcher's",
       Between(0, 65535), kNone, false},
      {"run_id", &C::run_id,
       "Unique run identifier (e.g. $(date +%s)), the same on every shard; keys in the store are prefixed "
       "with it. Default with srun/mpirun: the launcher's job id",
       kNoRange, kNone, false},
      {"redis_host", &C::redis_host, "Host of a Redis server where the shards meet", kNoRange, kNone, false},
      {"redis_port", &C::redis_port, "Port of that Redis server", Between(1, 65535), kNone, false},
      {"distributed_transport", &C::distributed_transport,
       "Transport between shards: tcp, or ibverbs on InfiniBand", kNoRange, kNone, false},
      {"distributed_interfaces", &C::distributed_interfaces,
       "Network interfaces (tcp) or InfiniBand devices to use, comma-separated; each carries a share of "
       "every collective (default: the address the host name resolves to)",
       kNoRange, ShardAgreement::kLength, false},
      {"allreduce_algorithm", &C::allreduce_algorithm,
       "Gloo allreduce across shards: auto (halving_doubling for a power-of-two shard count, else "
       "ring_chunked), ring, ring_chunked, halving_doubling, bcube (even shard counts)",
       kNoRange, kSame, false},
      {"allreduce_dtype", &C::allreduce_dtype,
       "Dtype the gradients cross shards (and GPUs) in: float, or bfloat16 / float16 for half the bytes, "
       "summed in float32 at every hop (float16 scaled by a power of two the shards agree on); the update "
       "reads float32 gradients",
       kNoRange, kSame, false},
      {"allreduce_bucket_mb", &C::allreduce_bucket_mb,
       "Gradients allreduced together: a bucket takes parameters (last layers first) until it holds this "
       "many MiB",
       Between(0, 1 << 20), kSame, false},
      {"allreduce_tail_bucket_mb", &C::allreduce_tail_bucket_mb,
       "Make the last bucket, reduced after the backward pass ends, only this many MiB of the first layers' "
       "gradients, so that little communication is left exposed (0: whatever remains)",
       Between(0, 1 << 20), kSame, false},
      {"allreduce_channels", &C::allreduce_channels,
       "Gradient allreduces in flight at once across shards, each on its own connections, in a fixed order "
       "(CPU devices; 0: 2 with several shards, else 1)",
       Between(0, kMaxAllreduceChannels), kSame, false},
      {"timeout", &C::timeout,
       "Seconds a shard waits for the others in a collective after the first iteration; a dead or stalled "
       "shard ends the run within it",
       Positive(1e6), kNone, false},
      {"first_iter_timeout", &C::first_iter_timeout,
       "Seconds a shard waits for the others to join, agree on the model and finish the first iteration",
       Positive(1e6), kNone, false},
      {"log_dir", &C::log_dir, "Directory of the CSV log, created if missing", kNoRange, kNone, false},
      {"log_every_secs", &C::log_every_secs,
       "When stderr is not a terminal (a cluster job's log), print a progress line there every this many "
       "seconds (0: never): epoch, iteration, images/s, loss, accuracy, learning rate, time left",
       Between(0, 1e6), kNone, false},
      {"log_every_iters", &C::log_every_iters,
       "Also print that progress line every this many iterations (0: never)", Between(0, 1LL << 40), kNone,
       false},
      {"iter_log", &C::iter_log,
       "Append the progress rows (at --log_every_secs / --log_every_iters, and at each epoch's end) to this "
       "CSV file, its folder created if missing (one running process per file); shard k > 0 adds _shard{k} "
       "to the name",
       kNoRange, kNone, false},
      {"tensorboard_dir", &C::tensorboard_dir,
       "Write TensorBoard event files here, created if missing: the options, the progress rows and each "
       "epoch's figures; with several shards one run folder each, shard<k>",
       kNoRange, kNone, false},
      {"tensorboard_shard0_only", &C::tensorboard_shard0_only,
       "With --tensorboard_dir and several shards, only shard 0 writes events, into the folder itself",
       kNoRange, kNone, false},
  };
  return table;
}

template <typename T>
constexpr bool kIsList = std::is_same_v<T, std::vector<int>> || std::is_same_v<T, std::vector<std::string>>;

template <typename T>
constexpr bool kIsNumber = std::is_arithmetic_v<T> && !std::is_same_v<T, bool>;

// Whether the type of the option's field (a list's element for a list) satisfies `predicate`, which is called
// with a value of that type: TypeIs(option, [](auto v) { return kIsNumber<decltype(v)>; }).
template <typename Predicate>
bool TypeIs(const TrainerOption& option, Predicate predicate) {
  return std::visit(
      [&](auto member) {
        using T = std::decay_t<decltype(std::declval<TrainerConfig>().*member)>;
        if constexpr (kIsList<T>) return predicate(typename T::value_type{});
        return predicate(T{});
      },
      option.member);
}

[[noreturn]] void BadValue(const TrainerOption& option, const std::string& text, const std::string& what) {
  throw InvalidInput(
      fmt::format("--{} {}: {}; accepted range {}", option.name, text, what, RangeText(option)));
}

template <typename T>
T ParseNumber(const TrainerOption& option, const std::string& text) {
  if constexpr (std::is_integral_v<T>) {
    T value{};
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    const bool negative_unsigned = std::is_unsigned_v<T> && !text.empty() && text[0] == '-';
    if (error == std::errc::result_out_of_range || negative_unsigned) BadValue(option, text, "out of range");
    if (error != std::errc() || end != text.data() + text.size()) BadValue(option, text, "not an integer");
    return value;
  } else {
    char* end = nullptr;
    errno = 0;
    const double value = std::strtod(text.c_str(), &end);
    if (text.empty() || std::isspace(static_cast<unsigned char>(text[0])) || *end != '\0' ||
        std::isnan(value))
      BadValue(option, text, "not a number");
    const double largest = std::is_same_v<T, float> ? FLT_MAX : DBL_MAX;
    if ((errno == ERANGE && std::abs(value) > 1) || std::abs(value) > largest)
      BadValue(option, text, "out of range");
    return static_cast<T>(value);
  }
}

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  if (text.empty()) return items;
  for (size_t start = 0;;) {
    size_t comma = text.find(',', start);
    items.push_back(text.substr(start, comma - start));
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

template <typename T>
void Parse(const TrainerOption& option, const std::string& text, T* value) {
  if constexpr (std::is_same_v<T, bool>) {
    // Python's spellings too: Caffe2's scripts write --use_cpu True or --use_cpu 1.
    if (text == "true" || text == "True" || text == "1")
      *value = true;
    else if (text == "false" || text == "False" || text == "0")
      *value = false;
    else
      throw InvalidInput(fmt::format("--{} {}: not a truth value; use true or false", option.name, text));
  } else if constexpr (std::is_same_v<T, std::string>) {
    *value = text;
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    *value = SplitList(text);
  } else if constexpr (std::is_same_v<T, std::vector<int>>) {
    value->clear();
    for (const std::string& item : SplitList(text)) value->push_back(ParseNumber<int>(option, item));
  } else {
    *value = ParseNumber<T>(option, text);
  }
}

template <typename T>
std::string Text(const T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value ? "true" : "false";
  } else if constexpr (kIsList<T>) {
    return fmt::format("{}", fmt::join(value, ","));
  } else {
    return fmt::format("{}", value);
  }
}

// Every range of the table lies within [0, 2^64).
std::string EndText(const TrainerOption& option, long double end) {
  if (IsInteger(option)) return fmt::format("{}", static_cast<uint64_t>(end));
  return fmt::format("{}", static_cast<double>(end));
}

// Why `value` is out of the option's range, or "" when it is within.
std::string OutOfRange(const TrainerOption& option, long double value) {
  const OptionRange& r = option.range;
  if (!(value >= r.min) || (r.min_excluded && value == r.min)) {
    if (r.min_excluded && r.min == 0) return "must be positive";
    if (r.min_excluded) return fmt::format("must be above {}", EndText(option, r.min));
    if (r.min == 0) return "must be >= 0";
    return fmt::format("must be at least {}", EndText(option, r.min));
  }
  if (value > r.max || (r.max_excluded && value == r.max))
    return fmt::format("must be {} {}", r.max_excluded ? "below" : "at most", EndText(option, r.max));
  return "";
}

template <typename T>
void CheckRange(const TrainerOption& option, const T& value) {
  if constexpr (std::is_same_v<T, std::vector<int>>) {
    for (int item : value) CheckRange(option, item);
  } else if constexpr (kIsNumber<T>) {
    std::string why = OutOfRange(option, static_cast<long double>(value));
    if (!why.empty())
      throw InvalidInput(fmt::format("--{} {}, got {}; accepted range {}", option.name, why, Text(value),
                                     RangeText(option)));
  }
}

}  // namespace

const std::vector<TrainerOption>& TrainerOptions() { return Table(); }

const TrainerOption& FindTrainerOption(const std::string& name) {
  for (const TrainerOption& option : Table())
    if (name == option.name) return option;
  std::vector<std::string> names;
  for (const TrainerOption& option : Table()) names.push_back(option.name);
  throw InvalidInput(fmt::format("unknown option '{}'; known: {}", name, fmt::join(names, ", ")));
}

bool IsNumeric(const TrainerOption& option) {
  return TypeIs(option, [](auto value) { return kIsNumber<decltype(value)>; });
}

bool IsInteger(const TrainerOption& option) {
  return TypeIs(option,
                [](auto value) { return kIsNumber<decltype(value)> && std::is_integral_v<decltype(value)>; });
}

bool IsFlag(const TrainerOption& option) {
  return std::holds_alternative<bool TrainerConfig::*>(option.member);
}

bool IsList(const TrainerOption& option) {
  return std::visit(
      [](auto member) { return kIsList<std::decay_t<decltype(std::declval<TrainerConfig>().*member)>>; },
      option.member);
}

void SetOption(TrainerConfig* config, const std::string& name, const std::string& value) {
  const TrainerOption& option = FindTrainerOption(name);
  std::visit([&](auto member) { Parse(option, value, &(config->*member)); }, option.member);
}

std::string OptionText(const TrainerConfig& config, const TrainerOption& option) {
  return std::visit([&](auto member) { return Text(config.*member); }, option.member);
}

std::string RangeText(const TrainerOption& option) {
  // Integers show their ends as integers, an excluded end moved inwards: (0, 1048576] reads [1, 1048576].
  const OptionRange& r = option.range;
  if (IsInteger(option))
    return fmt::format("[{}, {}]", EndText(option, r.min + (r.min_excluded ? 1 : 0)),
                       EndText(option, r.max - (r.max_excluded ? 1 : 0)));
  return fmt::format("{}{}, {}{}", r.min_excluded ? "(" : "[", EndText(option, r.min), EndText(option, r.max),
                     r.max_excluded ? ")" : "]");
}

void CheckOptionRanges(const TrainerConfig& config) {
  for (const TrainerOption& option : Table())
    std::visit([&](auto member) { CheckRange(option, config.*member); }, option.member);
}

std::vector<std::pair<std::string, std::string>> ShardAgreementEntries(const TrainerConfig& config) {
  std::vector<std::pair<std::string, std::string>> entries;
  for (const TrainerOption& option : Table()) {
    const std::string flag = std::string("--") + option.name;
    if (option.agreement == ShardAgreement::kValue) entries.emplace_back(flag, OptionText(config, option));
    if (option.agreement == ShardAgreement::kLength)
      entries.emplace_back(flag, fmt::format("{} values", SplitList(OptionText(config, option)).size()));
  }
  return entries;
}

}  // namespace lockstep
