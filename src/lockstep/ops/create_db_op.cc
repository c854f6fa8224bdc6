// CreateDB: () -> reader. Opens a training or evaluation stream and puts a BatchReader over it into the
// workspace object that its output names, for the ReadBatch ops with arg reader=<that name> (Caffe2's
// CreateDB, which graph code adds to param_init_net). The output is an object, not a tensor. Each run opens
// the data afresh and replaces the object, so the stream restarts at position 0 (ReadBatch looks its reader
// up on every run). Another holder of the old reader keeps a LevelDB database open, and the rerun then fails.
// Without batch_size, as Caffe2's programs call it (db, db_type, num_shards, shard_id), it only names the
// database, for ImageInput to open (deferred_reader.h).
// Its arguments are declared in the schema below, with `lockstep train`'s defaults (from SourceSpec); the
// data source's arguments are checked as `lockstep train` checks its flags, by CheckSourceOptions.
#include <filesystem>
#include <limits>
#include <set>
#include <string>

#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/data/batch_reader.h"
#include "lockstep/data/open_batch_source.h"
#include "lockstep/data/source_options.h"
#include "lockstep/ops/deferred_reader.h"

namespace lockstep {
namespace {

// The bound of num_replicas, which the reader keeps as an int.
constexpr double kMaxInt = std::numeric_limits<int>::max();

class CreateDBOp : public Operator {
 public:
  CreateDBOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws) {
    if (!HasArgument(def, "db") || StringArg("db").empty())
      FailOperator(def,
                   "argument db is required: \"fashion-mnist\", \"null\" (synthetic) or a database path");
    spec_.name = StringArg("db");
    spec_.db_type = StringArg("db_type");
    spec_.record_format = StringArg("record_format");
    spec_.color_order = StringArg("color_order");
    spec_.train = IntArg("train") == 1;
    spec_.seed = static_cast<uint64_t>(IntArg("seed"));
    spec_.channels = IntArg("num_channels");
    spec_.image_size = IntArg("image_size");
    spec_.scale = IntArg("scale");
    spec_.num_labels = IntArg("num_labels");
    spec_.decode_threads = IntArg("decode_threads");
    spec_.skip_bad_records = IntArg("skip_bad_records") == 1;
    const int64_t prefetch = IntArg("prefetch");
    std::set<std::string> given;
    for (const Argument& arg : def.arg()) given.insert(arg.name());
    deferred_ = !given.count("batch_size");
    if (deferred_) {
      // Caffe2's form: ImageInput brings the batch size and geometry, and checks the whole spec.
      num_shards_ = static_cast<int>(IntArg("num_shards"));
      shard_id_ = static_cast<int>(IntArg("shard_id"));
      if (shard_id_ >= num_shards_)
        FailOperator(def, fmt::format("shard_id {} must be below num_shards {}", shard_id_, num_shards_));
      return;
    }
    for (const char* caffe2_only : {"num_shards", "shard_id"})
      if (given.count(caffe2_only))
        FailOperator(def,
                     fmt::format("argument {} is for ImageInput's readers (CreateDB without batch_size); "
                                 "with batch_size, pass num_replicas = devices x shards",
                                 caffe2_only));
    batch_per_replica_ = IntArg("batch_size");
    replicas_ = static_cast<int>(IntArg("num_replicas"));
    try {
      CheckSourceOptions(spec_, batch_per_replica_, prefetch, given, "argument ");
    } catch (const InvalidInput& e) {
      FailOperator(def, e.what());
    }
    prefetch_ = static_cast<int>(prefetch);
    // As in the trainer, only a database's reader reads ahead: its records take decoding.
    if (!IsDatabase(spec_.name)) prefetch_ = 0;
  }

  void Run() override {
    if (deferred_) {
      if (IsDatabase(spec_.name) && !std::filesystem::exists(spec_.name))
        FailOperator(def_, fmt::format("argument db '{}' does not exist; pass the path of an {} database",
                                       spec_.name, spec_.db_type));
      ws_->SetObject(def_.output(0), std::make_shared<DeferredReader>(spec_, num_shards_, shard_id_));
      return;
    }
    // The old reader goes first: it may hold the database open, and LevelDB allows one open at a time.
    ws_->SetObject(def_.output(0), std::shared_ptr<BatchReader>());
    std::shared_ptr<BatchSource> source;
    try {
      source = OpenBatchSource(spec_);
    } catch (const Error& e) {
      FailOperator(def_, fmt::format("argument db '{}' cannot be opened: {}", spec_.name, e.what()));
    }
    ws_->SetObject(def_.output(0),
                   std::make_shared<BatchReader>(source, batch_per_replica_, replicas_, prefetch_));
  }

 private:
  SourceSpec spec_;
  bool deferred_ = false;  // no batch_size: a DeferredReader for ImageInput
  int num_shards_ = 1, shard_id_ = 0;
  int64_t batch_per_replica_ = 0;
  int replicas_ = 1;
  int prefetch_ = 0;
};

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(CreateDB)
    .SetDoc(
        "Opens a training or evaluation stream and puts a reader over it into the workspace object its "
        "output names, for the ReadBatch ops with reader=<that name>; each run restarts the stream.")
    .Output(0, "reader", "a workspace object: the BatchReader")
    .Arg("db", ArgType::kString, "required: \"fashion-mnist\", \"null\" (synthetic data) or a database path")
    .Arg("batch_size", ArgType::kInt,
         fmt::format("records each replica reads per step, in [1, {}]; without it, as Caffe2's CreateDB, "
                     "the output is a database for ImageInput, which gives the batch size and geometry",
                     kMaxBatchSize))
    .Arg("num_replicas", ArgType::kInt, 1,
         "the replicas of the whole job (devices x shards); replica r reads slice r of each global batch of "
         "batch_size x num_replicas records")
    .Range(1, kMaxInt)
    .Arg("num_shards", ArgType::kInt, 1, "without batch_size (Caffe2's): the shards (machines) of the job")
    .Range(1, kMaxInt)
    .Arg("shard_id", ArgType::kInt, 0, "without batch_size (Caffe2's): this shard's id, below num_shards")
    .Range(0, kMaxInt)
    .Arg("train", ArgType::kInt, SourceSpec{}.train,
         "1: a shuffled stream with random crops and mirrors (fashion-mnist: its training set); 0: file "
         "order with centre crops (its test set)")
    .Range(0, 1)
    .Arg("seed", ArgType::kInt, static_cast<int64_t>(SourceSpec{}.seed), "data order and augmentation")
    .Min(0)
    .Arg("db_type", ArgType::kString, SourceSpec{}.db_type, "the database backend, one of DbTypes()")
    .Arg("record_format", ArgType::kString, SourceSpec{}.record_format, "auto, datum or tensorprotos")
    .Arg("color_order", ArgType::kString, SourceSpec{}.color_order,
         "the channel order the network sees: bgr or rgb")
    .Arg("num_channels", ArgType::kInt, SourceSpec{}.channels,
         fmt::format("image channels, in [1, {}] (fashion-mnist: 1)", kMaxChannels))
    .Arg("image_size", ArgType::kInt, SourceSpec{}.image_size,
         fmt::format("side of the square images, in [1, {}] (fashion-mnist: 28)", kMaxImageSize))
    .Arg("scale", ArgType::kInt, SourceSpec{}.scale,
         fmt::format("images are resized so their shortest side is max(scale, image_size); in [0, {}]",
                     kMaxImageSize))
    .Arg("num_labels", ArgType::kInt, SourceSpec{}.num_labels,
         fmt::format("classes, in [{}, {}] (fashion-mnist: 10)", kMinLabels, kMaxLabels))
    .Arg("decode_threads", ArgType::kInt, SourceSpec{}.decode_threads,
         fmt::format("databases: threads that decode and augment, in [1, {}]", kMaxDecodeThreads))
    .Arg("skip_bad_records", ArgType::kInt, SourceSpec{}.skip_bad_records,
         "1: skip (and count) records that do not parse or decode")
    .Range(0, 1)
    .Arg("prefetch", ArgType::kInt, BatchReader::kDefaultPrefetch,
         fmt::format("databases: slices each replica's reader prepares ahead, in [0, {}]", kMaxPrefetch))
    .ObjectOutputs(1)
    .ShapeFunction([](const OperatorDef&, const std::vector<TensorShape>&) {
      return std::vector<TensorShape>{{{}, DataType::kUndefined}};  // an object, not a tensor
    });
// One class for both devices: the reader lives in host memory, and ReadBatch copies to the device.
LOCKSTEP_REGISTER_CPU_OPERATOR(CreateDB, CreateDBOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(CreateDB, CreateDBOp);
LOCKSTEP_NO_GRADIENT(CreateDB);

}  // namespace lockstep
