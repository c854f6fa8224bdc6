// ImageInput (Caffe2's): (reader) -> (data, label). Caffe2's image pipeline mapped onto lockstep's reader:
// `reader` is what CreateDB wrote without a batch size (deferred_reader.h), and the op's arguments, with
// Caffe2's names and defaults, give the batch size and geometry of the one BatchReader that every replica's
// ImageInput shares. The arguments Caffe2's resnet50_trainer passes are supported (output_type float16 too,
// converted on the host); a value lockstep's reader does not implement is refused in one line, and arguments
// Caffe2 has but lockstep does not declare are refused by the schema. Each run reads this replica's slice of
// the next global batch, as ReadBatch does.
#include <set>

#include "lockstep/core/gradient.h"
#include "lockstep/core/half.h"
#include "lockstep/core/operator.h"
#include "lockstep/data/source_options.h"
#include "lockstep/ops/deferred_reader.h"

namespace lockstep {

std::shared_ptr<BatchReader> DeferredReader::Open(const OperatorDef& def, const SourceSpec& spec,
                                                  int64_t batch_per_replica, int replicas) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (reader_) {
    const SourceSpec& was = opened_spec_;
    if (reader_->batch_per_replica() != batch_per_replica || reader_->replicas() != replicas ||
        was.image_size != spec.image_size || was.scale != spec.scale || was.train != spec.train ||
        was.channels != spec.channels || was.record_format != spec.record_format)
      FailOperator(def, fmt::format("its reader was opened by {} with other arguments; every ImageInput of "
                                    "one reader takes the same batch_size, crop, scale, color, is_test, "
                                    "use_caffe_datum and num_replicas",
                                    opened_by_));
    return reader_;
  }
  std::shared_ptr<BatchSource> source;
  try {
    source = OpenBatchSource(spec);
  } catch (const Error& e) {
    FailOperator(def, fmt::format("database '{}' cannot be opened: {}", spec.name, e.what()));
  }
  const int prefetch = IsDatabase(spec.name) ? BatchReader::kDefaultPrefetch : 0;
  reader_ = std::make_shared<BatchReader>(source, batch_per_replica, replicas, prefetch);
  opened_by_ = DescribeOperator(def);
  opened_spec_ = spec;
  return reader_;
}

namespace {

// lockstep's reader normalizes every pixel as (x - 128) / 128, as resnet50_trainer asks.
constexpr float kPixelMean = 128.f, kPixelStd = 128.f;

void CheckRequiredArguments(const OperatorDef& def) {
  for (const char* required : {"batch_size", "crop"})
    if (!HasArgument(def, required))
      FailOperator(def, fmt::format("argument {} is required (as in Caffe2's ImageInput)", required));
}

class ImageInputOp : public Operator {
 public:
  ImageInputOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws) {
    CheckRequiredArguments(def);
    Refuse(FloatArg("mean") != kPixelMean || FloatArg("std") != kPixelStd,
           "lockstep's reader normalizes pixels as (x - 128) / 128: pass mean=128 and std=128");
    Refuse(IntArg("is_test") == 0 && IntArg("mirror") == 0,
           "training streams crop and mirror at random: pass mirror=1, or is_test=1 for centre crops");
    Refuse(IntArg("use_gpu_transform") != 0,
           "ImageInput transforms on the CPU; pass use_gpu_transform=0 (the data is copied to the device)");
    const std::string output_type = StringArg("output_type");
    Refuse(
        output_type != "float" && output_type != "float16",
        fmt::format("output_type '{}' is not a dtype ImageInput writes; pass float or float16", output_type));
    half_ = output_type == "float16";
    replica_ = static_cast<int>(IntArg("replica"));
    replicas_ = static_cast<int>(IntArg("num_replicas"));
    Refuse(replica_ >= replicas_,
           fmt::format("replica {} must be below num_replicas {}", replica_, replicas_));
    std::shared_ptr<DeferredReader> reader = Reader();
    spec_ = reader->source();
    spec_.image_size = IntArg("crop");
    spec_.scale = std::max<int64_t>(IntArg("scale"), 0);
    spec_.channels = IntArg("color") ? 3 : 1;
    spec_.train = IntArg("is_test") == 0;
    spec_.record_format = IntArg("use_caffe_datum") ? "datum" : "tensorprotos";
    spec_.decode_threads = IntArg("decode_threads");
    const std::set<std::string> given{"num_channels", "image_size", "scale"};
    try {
      CheckSourceOptions(spec_, IntArg("batch_size"), BatchReader::kDefaultPrefetch, given, "argument ");
    } catch (const InvalidInput& e) {
      FailOperator(def, e.what());
    }
  }

  void Run() override {
    // data is (batch_size, C, crop, crop) float32 or float16, label is (batch_size) int32
    std::shared_ptr<DeferredReader> reader = Reader();
    std::shared_ptr<BatchReader> batches =
        reader->Open(def_, spec_, IntArg("batch_size"), replicas_ * reader->num_shards());
    const int replica = reader->shard_id() * replicas_ + replica_;
    if (device().type == DeviceType::kCpu && !half_) return batches->Read(replica, Output(0), Output(1));
    batches->Read(replica, &host_data_, &host_label_);
    if (half_) {  // rounded on the host, as FloatToHalf rounds
      host_half_.Resize(host_data_.shape(), DataType::kFloat16);
      for (int64_t i = 0; i < host_data_.numel(); ++i)
        host_half_.data<Float16>()[i] = ToFloat16(host_data_.data<float>()[i]);
    }
    Output(0)->CopyFrom(half_ ? host_half_ : host_data_);
    Output(1)->CopyFrom(host_label_);
  }

 private:
  void Refuse(bool refused, const std::string& why) const {
    if (refused) FailOperator(def_, why);
  }

  std::shared_ptr<DeferredReader> Reader() const {
    std::shared_ptr<DeferredReader> reader = ws_->FindObject<DeferredReader>(InputName(0));
    if (!reader)
      FailOperator(def_, fmt::format("input '{}' must be what CreateDB wrote without a batch size (Caffe2's "
                                     "CreateDB(db, db_type, num_shards, shard_id)); run that CreateDB first",
                                     InputName(0)));
    return reader;
  }

  SourceSpec spec_;
  int replica_ = 0, replicas_ = 1;
  bool half_ = false;              // output_type float16
  Tensor host_data_, host_label_;  // the slice as read, in host memory, unless a CPU reads float32 directly
  Tensor host_half_;               // float16 data, in host memory
};

std::vector<TensorShape> ImageInputShapes(const OperatorDef& def, const std::vector<TensorShape>&) {
  CheckRequiredArguments(def);
  const int64_t batch = IntArg(def, "batch_size"), crop = IntArg(def, "crop");
  const DataType type = StringArg(def, "output_type") == "float16" ? DataType::kFloat16 : DataType::kFloat;
  return {{{batch, IntArg(def, "color") ? 3 : 1, crop, crop}, type}, {{batch}, DataType::kInt32}};
}

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(ImageInput)
    .SetDoc(
        "Reads this replica's slice of the next global batch of images from a database that CreateDB "
        "named without a batch size (Caffe2's ImageInput): resized, cropped, mirrored and normalized by "
        "lockstep's reader.")
    .Input(0, "reader", "a workspace object: what CreateDB(db, db_type, num_shards, shard_id) wrote")
    .Output(0, "data", "(batch_size, 3 or 1, crop, crop) float32 or float16, (x - 128) / 128")
    .Output(1, "label", "(batch_size) int32")
    .Arg("batch_size", ArgType::kInt, "required: the images this replica reads per run")
    .Min(1)
    .Arg("crop", ArgType::kInt, "required: the side of the square crop")
    .Min(1)
    .Arg("scale", ArgType::kInt, -1,
         "the shortest side is resized to max(scale, crop) before cropping; -1: to crop")
    .Min(-1)
    .Arg("mirror", ArgType::kInt, 0, "1: mirror half the training images at random; must be 1 unless is_test")
    .Range(0, 1)
    .Arg("is_test", ArgType::kInt, 0,
         "1: the records in database order with centre crops and no mirrors (lockstep's evaluation stream)")
    .Range(0, 1)
    .Arg("mean", ArgType::kFloat, 0.f, "subtracted from every pixel; lockstep's reader takes 128 only")
    .Arg("std", ArgType::kFloat, 1.f, "divides every pixel after the mean; lockstep's reader takes 128 only")
    .Arg("color", ArgType::kInt, 1, "1: 3 colour channels, 0: 1 grey channel")
    .Range(0, 1)
    .Arg("use_caffe_datum", ArgType::kInt, 0, "1: records are Caffe Datums, 0: Caffe2 TensorProtos")
    .Range(0, 1)
    .Arg("decode_threads", ArgType::kInt, 4, "threads that decode and augment")
    .Min(1)
    .Arg("output_type", ArgType::kString, "float",
         "the data's dtype: float, or float16 (rounded to nearest even on the host)")
    .Arg("use_gpu_transform", ArgType::kInt, 0, "0 only: images are transformed on the CPU")
    .Range(0, 1)
    .Arg("replica", ArgType::kInt, 0,
         "lockstep's: this replica's index among the shard's replicas, which says its slice of each batch")
    .Min(0)
    .Arg("num_replicas", ArgType::kInt, 1, "lockstep's: the replicas (devices) of each shard")
    .Min(1)
    .ObjectInputs(1)
    .ShapeFunction(ImageInputShapes);
// One class for both devices: the reader lives in host memory, and the slice is copied to the device.
LOCKSTEP_REGISTER_CPU_OPERATOR(ImageInput, ImageInputOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(ImageInput, ImageInputOp);
LOCKSTEP_NO_GRADIENT(ImageInput);

}  // namespace lockstep
