// CreateDB: () -> reader. Opens a training or evaluation stream and puts a BatchReader over it into the
// workspace object that its output names, for the ReadBatch ops with arg reader=<that name> (Caffe2's
// CreateDB, which graph code adds to param_init_net). The output is an object, not a tensor. Each run opens
// the data afresh and replaces the object, so the stream restarts at position 0 (ReadBatch looks its reader
// up on every run). Another holder of the old reader keeps a LevelDB database open, and the rerun then fails.
// Its arguments are declared in the schema below, with `lockstep train`'s defaults (from SourceSpec).
#include <algorithm>
#include <limits>
#include <utility>

#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/data/batch_reader.h"
#include "lockstep/data/db.h"
#include "lockstep/data/image.h"
#include "lockstep/data/image_record.h"
#include "lockstep/data/open_batch_source.h"

namespace lockstep {
namespace {

// The bound of the arguments that the reader keeps as ints.
constexpr double kMaxInt = std::numeric_limits<int>::max();

class CreateDBOp : public Operator {
 public:
  CreateDBOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws) {
    if (!HasArgument(def, "db") || StringArg("db").empty())
      FailOperator(def,
                   "argument db is required: \"fashion-mnist\", \"null\" (synthetic) or a database path");
    spec_.name = StringArg("db");
    spec_.db_type = StringArg("db_type");
    const std::vector<std::string> db_types = DbTypes();
    if (std::find(db_types.begin(), db_types.end(), spec_.db_type) == db_types.end())
      FailOperator(def, fmt::format("argument db_type '{}' is not a database type; use one of: {}",
                                    spec_.db_type, fmt::join(db_types, ", ")));
    spec_.record_format = StringArg("record_format");
    try {
      ParseRecordFormat(spec_.record_format);
    } catch (const InvalidInput& e) {
      FailOperator(def, fmt::format("argument record_format: {}", e.what()));
    }
    spec_.color_order = StringArg("color_order");
    try {
      ParseColorOrder(spec_.color_order);
    } catch (const InvalidInput&) {
      FailOperator(def, fmt::format("argument color_order must be bgr or rgb, got '{}'", spec_.color_order));
    }
    if (!HasArgument(def, "batch_size"))
      FailOperator(def, "argument batch_size is required: the records each replica reads per step");
    batch_per_replica_ = IntArg("batch_size");
    replicas_ = static_cast<int>(IntArg("num_replicas"));
    spec_.train = IntArg("train") == 1;
    spec_.seed = static_cast<uint64_t>(IntArg("seed"));
    spec_.channels = static_cast<int>(IntArg("num_channels"));
    spec_.image_size = static_cast<int>(IntArg("image_size"));
    spec_.scale = static_cast<int>(IntArg("scale"));
    spec_.num_labels = static_cast<int>(IntArg("num_labels"));
    spec_.decode_threads = static_cast<int>(IntArg("decode_threads"));
    spec_.skip_bad_records = IntArg("skip_bad_records") == 1;
    if (spec_.name == "fashion-mnist") CheckFashionMnistGeometry();
    prefetch_ = static_cast<int>(IntArg("prefetch"));
    // As in the trainer, only a database's reader reads ahead: its records take decoding.
    if (!IsDatabase(spec_.name)) prefetch_ = 0;
  }

  void Run() override {
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
  // fashion-mnist has its own geometry; a given argument that contradicts it would be ignored silently.
  void CheckFashionMnistGeometry() const {
    const std::pair<const char*, int> geometry[] = {{"num_channels", kFashionMnistChannels},
                                                    {"image_size", kFashionMnistImageSize},
                                                    {"num_labels", kFashionMnistLabels}};
    for (const auto& [name, expected] : geometry)
      if (HasArgument(def_, name) && IntArg(name) != expected)
        FailOperator(def_, fmt::format("argument {} {} does not match fashion-mnist ({}); drop the argument",
                                       name, IntArg(name), expected));
  }

  SourceSpec spec_;
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
    .Arg("batch_size", ArgType::kInt, "required: records each replica reads per step")
    .Min(1)
    .Arg("num_replicas", ArgType::kInt, 1,
         "the replicas of the whole job (devices x shards); replica r reads slice r of each global batch of "
         "batch_size x num_replicas records")
    .Range(1, kMaxInt)
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
    .Arg("num_channels", ArgType::kInt, SourceSpec{}.channels, "image channels (fashion-mnist: 1)")
    .Range(1, kMaxInt)
    .Arg("image_size", ArgType::kInt, SourceSpec{}.image_size,
         "side of the square images (fashion-mnist: 28)")
    .Range(1, kMaxInt)
    .Arg("scale", ArgType::kInt, SourceSpec{}.scale,
         "images are resized so their shortest side is max(scale, image_size)")
    .Range(0, kMaxInt)
    .Arg("num_labels", ArgType::kInt, SourceSpec{}.num_labels, "classes (fashion-mnist: 10)")
    .Range(1, kMaxInt)
    .Arg("decode_threads", ArgType::kInt, SourceSpec{}.decode_threads,
         "databases: threads that decode and augment")
    .Range(1, kMaxInt)
    .Arg("skip_bad_records", ArgType::kInt, SourceSpec{}.skip_bad_records,
         "1: skip (and count) records that do not parse or decode")
    .Range(0, 1)
    .Arg("prefetch", ArgType::kInt, BatchReader::kDefaultPrefetch,
         "databases: slices each replica's reader prepares ahead")
    .Range(0, kMaxInt)
    .NumInputs(0)
    .NumOutputs(1)
    .ObjectOutputs(1)
    .ShapeFunction([](const OperatorDef&, const std::vector<TensorShape>&) {
      return std::vector<TensorShape>{{{}, DataType::kUndefined}};  // an object, not a tensor
    });
// One class for both devices: the reader lives in host memory, and ReadBatch copies to the device.
LOCKSTEP_REGISTER_CPU_OPERATOR(CreateDB, CreateDBOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(CreateDB, CreateDBOp);
LOCKSTEP_NO_GRADIENT(CreateDB);

}  // namespace lockstep
