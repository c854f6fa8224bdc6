// CreateDB: () -> reader. Opens a training or evaluation stream and puts a BatchReader over it into the
// workspace object that its output names, for the ReadBatch ops with arg reader=<that name> (Caffe2's
// CreateDB, which graph code adds to param_init_net). The output is an object, not a tensor. Each run opens
// the data afresh and replaces the object, so the stream restarts at position 0 (ReadBatch looks its reader
// up on every run). Another holder of the old reader keeps a LevelDB database open, and the rerun then fails.
// Arguments (defaults are `lockstep train`'s, from SourceSpec):
//   db (required): "fashion-mnist", "null" (synthetic) or a database path.
//   batch_size (required, > 0): records each replica reads per step.
//   num_replicas (1): the replicas of the whole job (devices x shards); replica r reads slice r of each
//     global batch of batch_size x num_replicas records.
//   train (1): 1 reads a shuffled stream with random crops and mirrors (fashion-mnist: its training set);
//     0 reads in file order with centre crops (fashion-mnist: its test set), for evaluation.
//   seed (1): data order and augmentation.
//   db_type (lmdb), record_format (auto), color_order (bgr), num_channels, image_size, scale, num_labels,
//     decode_threads, skip_bad_records (0/1): as the trainer's flags of the same names (see SourceSpec);
//     fashion-mnist's geometry is fixed, and a num_channels, image_size or num_labels against it is an error.
//   prefetch: slices each replica's reader prepares ahead; databases only, as in the trainer.
#include <algorithm>
#include <limits>
#include <optional>
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

constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();
constexpr int64_t kMaxInt = std::numeric_limits<int>::max();

class CreateDBOp : public Operator {
 public:
  CreateDBOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws) {
    const SourceSpec defaults;
    spec_.name = StringArg("db", "");
    if (spec_.name.empty())
      FailOperator(def,
                   "argument db is required: \"fashion-mnist\", \"null\" (synthetic) or a database path");
    spec_.db_type = StringArg("db_type", defaults.db_type);
    const std::vector<std::string> db_types = DbTypes();
    if (std::find(db_types.begin(), db_types.end(), spec_.db_type) == db_types.end())
      FailOperator(def, fmt::format("argument db_type '{}' is not a database type; use one of: {}",
                                    spec_.db_type, fmt::join(db_types, ", ")));
    spec_.record_format = StringArg("record_format", defaults.record_format);
    try {
      ParseRecordFormat(spec_.record_format);
    } catch (const InvalidInput& e) {
      FailOperator(def, fmt::format("argument record_format: {}", e.what()));
    }
    spec_.color_order = StringArg("color_order", defaults.color_order);
    try {
      ParseColorOrder(spec_.color_order);
    } catch (const InvalidInput&) {
      FailOperator(def, fmt::format("argument color_order must be bgr or rgb, got '{}'", spec_.color_order));
    }
    batch_per_replica_ = IntArgIn("batch_size", std::nullopt, 1, kMaxInt64, "a positive integer");
    replicas_ = static_cast<int>(IntArgIn("num_replicas", 1, 1, kMaxInt, "a positive integer"));
    spec_.train = IntArgIn("train", defaults.train, 0, 1, "0 or 1") == 1;
    spec_.seed = static_cast<uint64_t>(
        IntArgIn("seed", static_cast<int64_t>(defaults.seed), 0, kMaxInt64, "a non-negative integer"));
    spec_.channels =
        static_cast<int>(IntArgIn("num_channels", defaults.channels, 1, kMaxInt, "a positive integer"));
    spec_.image_size =
        static_cast<int>(IntArgIn("image_size", defaults.image_size, 1, kMaxInt, "a positive integer"));
    spec_.scale = static_cast<int>(IntArgIn("scale", defaults.scale, 0, kMaxInt, "a non-negative integer"));
    spec_.num_labels =
        static_cast<int>(IntArgIn("num_labels", defaults.num_labels, 1, kMaxInt, "a positive integer"));
    spec_.decode_threads = static_cast<int>(
        IntArgIn("decode_threads", defaults.decode_threads, 1, kMaxInt, "a positive integer"));
    spec_.skip_bad_records = IntArgIn("skip_bad_records", defaults.skip_bad_records, 0, 1, "0 or 1") == 1;
    if (spec_.name == "fashion-mnist") CheckFashionMnistGeometry();
    prefetch_ = static_cast<int>(
        IntArgIn("prefetch", BatchReader::kDefaultPrefetch, 0, kMaxInt, "a non-negative integer"));
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
  // The integer argument `name`, which must lie in [min, max] (`accepted` says so in words); one without a
  // default is required.
  int64_t IntArgIn(const std::string& name, std::optional<int64_t> default_value, int64_t min, int64_t max,
                   const char* accepted) const {
    if (!default_value && !HasArgument(def_, name))
      FailOperator(def_, fmt::format("argument {} is required: {}", name, accepted));
    const int64_t value = IntArg(name, default_value.value_or(0));
    if (value < min || value > max)
      FailOperator(def_, fmt::format("argument {} must be {}, got {}", name, accepted, value));
    return value;
  }

  // fashion-mnist has its own geometry; a given argument that contradicts it would be ignored silently.
  void CheckFashionMnistGeometry() const {
    const std::pair<const char*, int> geometry[] = {{"num_channels", kFashionMnistChannels},
                                                    {"image_size", kFashionMnistImageSize},
                                                    {"num_labels", kFashionMnistLabels}};
    for (const auto& [name, expected] : geometry)
      if (HasArgument(def_, name) && IntArg(name, expected) != expected)
        FailOperator(def_, fmt::format("argument {} {} does not match fashion-mnist ({}); drop the argument",
                                       name, IntArg(name, expected), expected));
  }

  SourceSpec spec_;
  int64_t batch_per_replica_ = 0;
  int replicas_ = 1;
  int prefetch_ = 0;
};

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(CreateDB).NumInputs(0).NumOutputs(1).ObjectOutputs(1).ShapeFunction(
    [](const OperatorDef&, const std::vector<TensorShape>&) {
      return std::vector<TensorShape>{{{}, DataType::kUndefined}};  // an object, not a tensor
    });
// One class for both devices: the reader lives in host memory, and ReadBatch copies to the device.
LOCKSTEP_REGISTER_CPU_OPERATOR(CreateDB, CreateDBOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(CreateDB, CreateDBOp);
LOCKSTEP_NO_GRADIENT(CreateDB);

}  // namespace lockstep
