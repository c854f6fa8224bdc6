// Collective operators over the devices of a data-parallel model, through the Communicator that input 0
// names: a workspace object that CreateCommonWorld writes (common_world_op.cc), so that the graph shows
// which op each collective depends on. The other inputs are grouped by device: with num_devices = k and m
// blobs per device, input 1 + d * m + j is blob j of device d; output d * m + j is where its result goes (the
// same blob when computed in place).
//   Allreduce: every output gets the sum of blob j over all devices (and all processes). A device's m blobs
//              travel as one contiguous bucket (ops/gradient_buckets.h), so one collective serves many
//              small gradients; with wire_dtype bfloat16 or float16 the bucket crosses processes in 16 bits,
//              summed in float32 at every hop (comm/wire_dtype.h).
//   Broadcast: every output gets device 0's blob j (of the communicator's rank 0).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "lockstep/comm/wire_dtype.h"
#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/collective_op.h"
#include "lockstep/ops/op_defs.h"

namespace lockstep {

int CollectiveBlobsPerDevice(const OperatorDef& def, int num_devices) {
  const int blobs = def.input_size() - 1, outputs = def.output_size();
  if (num_devices < 1 || blobs % num_devices != 0 || blobs != outputs)
    FailOperator(
        def, fmt::format("needs a communicator, then as many blobs as outputs, a multiple of num_devices={}; "
                         "got {} blobs and {} outputs",
                         num_devices, blobs, outputs));
  return blobs / num_devices;
}

std::shared_ptr<Communicator> CommunicatorInput(const OperatorDef& def, const Workspace& ws,
                                                const std::string& what_to_do) {
  std::shared_ptr<Communicator> communicator = ws.FindObject<Communicator>(def.input(0));
  if (!communicator)
    FailOperator(def, fmt::format("the workspace holds no communicator '{}'; {}", def.input(0), what_to_do));
  return communicator;
}

void CheckReplicaMatches(const OperatorDef& def, int j, const Tensor& first, int i, const Tensor& replica) {
  if (replica.shape() != first.shape() || replica.dtype() != first.dtype())
    FailOperator(def, fmt::format("'{}' is {} {} but '{}' is {} {}; replicas must match", def.input(1 + j),
                                  DataTypeName(first.dtype()), ShapeToString(first.shape()), def.input(1 + i),
                                  DataTypeName(replica.dtype()), ShapeToString(replica.shape())));
}

GradientBucket PlanDeviceBucket(const OperatorDef& def, const std::vector<const Tensor*>& blobs) {
  std::vector<std::pair<std::string, Shape>> packed;
  for (size_t j = 0; j < blobs.size(); ++j) {
    const Tensor& blob = *blobs[j];
    if (blob.dtype() != DataType::kFloat || !blob.is_plain())
      FailOperator(def,
                   fmt::format("'{}' is {}{}; Allreduce sums plain float tensors", def.output(j),
                               DataTypeName(blob.dtype()), blob.is_plain() ? "" : " in a blocked layout"));
    packed.emplace_back(def.output(j), blob.shape());
  }
  return PlanGradientBuckets(packed, SIZE_MAX, 0, ParseFloatType(StringArg(def, "wire_dtype"), "wire_dtype"))
      .at(0);
}

void CheckBucketBlob(const OperatorDef& def, const GradientBucket& bucket, int j, const Tensor& blob) {
  if (blob.shape() != bucket.shapes[j] || blob.dtype() != DataType::kFloat || !blob.is_plain())
    FailOperator(def, fmt::format("'{}' changed from plain float {} to {} {} between steps", bucket.params[j],
                                  ShapeToString(bucket.shapes[j]), DataTypeName(blob.dtype()),
                                  ShapeToString(blob.shape())));
}

void CheckBroadcastBlob(const OperatorDef& def, int j, const Tensor& blob) {
  if (!blob.is_plain())
    FailOperator(def, fmt::format("'{}' is not plain; broadcast parameters and state only", def.output(j)));
}

namespace {

// Output i is blob i: its shape and dtype are those of input 1 + i.
std::vector<TensorShape> CollectiveShapes(const OperatorDef& def, const std::vector<TensorShape>& inputs) {
  std::vector<TensorShape> outputs;
  for (int i = 0; i < def.output_size(); ++i) outputs.push_back(inputs.at(1 + i));
  return outputs;
}

// What Allreduce and Broadcast share: the communicator, then num_devices groups of blobs, each output in
// place of its blob.
void DeclareCollective(OpSchema& schema) {
  schema.Input(0, "world", "a workspace object: CreateCommonWorld's communicator")
      .Input(1, "blobs...", "num_devices groups of m blobs: blob j of device d is input 1 + d * m + j")
      .Arg("num_devices", ArgType::kInt, 1, "the devices the blobs are grouped by")
      .Min(1)
      .NumInputs(2, INT_MAX)
      .NumOutputs(1, INT_MAX)
      .ObjectInputs(1)
      .AllowInplaceShifted(1)
      .ShapeFunction(CollectiveShapes)
      .Collective();
}

class CollectiveOp : public Operator {
 public:
  CollectiveOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), num_devices_(static_cast<int>(IntArg("num_devices"))) {
    per_device_ = CollectiveBlobsPerDevice(def, num_devices_);
  }

 protected:
  // Checks that blob j has the same shape and dtype on every device and makes each output its input's shape.
  void PrepareOutputs() {
    for (int j = 0; j < per_device_; ++j) {
      const Tensor& first = Input(1 + j);
      for (int d = 0; d < num_devices_; ++d) {
        int i = d * per_device_ + j;
        const Tensor& in = Input(1 + i);
        CheckReplicaMatches(def_, j, first, i, in);
        if (!IsInplace(1 + i, i)) Output(i)->CopyFrom(in);
      }
    }
  }

  int num_devices_, per_device_ = 0;
};

// A device's blobs live in one bucket buffer: on the first run the op moves them there
// (Tensor::ShareStorage), so the gradient ops of later steps write straight into the bucket and the reduction
// needs no copies. A blob that an op has since reallocated is copied in and out instead, and moved back.
class AllreduceOp : public CollectiveOp {
 public:
  using CollectiveOp::CollectiveOp;

  void Run() override {
    std::shared_ptr<Communicator> communicator = CommunicatorInput(def_, *ws_);
    PrepareOutputs();
    if (buckets_.empty()) AllocateBuckets();
    for (int d = 0; d < num_devices_; ++d) {
      for (int j = 0; j < per_device_; ++j) {
        Tensor* blob = Output(d * per_device_ + j);
        CheckBucketBlob(def_, bucket_, j, *blob);
        uint8_t* slice = buckets_[d].get() + bucket_.offsets[j];
        if (blob->raw_data() != slice) {
          std::memcpy(slice, blob->raw_data(), blob->nbytes());
          blob->ShareStorage(buckets_[d], bucket_.offsets[j], blob->nbytes());
        }
      }
    }
    communicator->AllreduceOverWire(buffers_, bucket_.bytes / sizeof(float), bucket_.wire);
  }

 private:
  void AllocateBuckets() {
    std::vector<const Tensor*> blobs;
    for (int j = 0; j < per_device_; ++j) blobs.push_back(Output(j));
    bucket_ = PlanDeviceBucket(def_, blobs);
    for (int d = 0; d < num_devices_; ++d) {
      auto* memory = static_cast<uint8_t*>(std::aligned_alloc(64, std::max<size_t>(bucket_.bytes, 64)));
      LOCKSTEP_ENFORCE(memory != nullptr, "out of memory for a {}-byte gradient bucket", bucket_.bytes);
      std::memset(memory, 0, bucket_.bytes);
      buckets_.emplace_back(memory, [](uint8_t* p) { std::free(p); });
      buffers_.push_back(reinterpret_cast<float*>(memory));
    }
  }

  GradientBucket bucket_;                          // the layout, the same on every device
  std::vector<std::shared_ptr<uint8_t>> buckets_;  // one contiguous buffer per device
  std::vector<float*> buffers_;                    // the same, as the communicator takes them
};

class BroadcastOp : public CollectiveOp {
 public:
  using CollectiveOp::CollectiveOp;

  void Run() override {
    std::shared_ptr<Communicator> communicator = CommunicatorInput(def_, *ws_);
    PrepareOutputs();
    for (int j = 0; j < per_device_; ++j) {
      std::vector<void*> buffers(num_devices_);
      for (int d = 0; d < num_devices_; ++d) {
        Tensor* blob = Output(d * per_device_ + j);
        CheckBroadcastBlob(def_, j, *blob);
        buffers[d] = blob->raw_data();
      }
      communicator->Broadcast(buffers, Output(j)->nbytes(), 0);
    }
  }
};

}  // namespace

OperatorDef AllreduceDef(const std::string& world, const std::vector<std::string>& blobs,
                         const std::vector<std::string>& outputs, int num_devices, DataType wire) {
  std::vector<std::string> inputs{world};
  inputs.insert(inputs.end(), blobs.begin(), blobs.end());
  std::vector<Arg> args{Arg("num_devices", int64_t{num_devices})};
  if (wire != DataType::kFloat) args.push_back(Arg("wire_dtype", std::string(DataTypeName(wire))));
  return MakeOperatorDef("Allreduce", inputs, outputs, args);
}

OperatorDef BroadcastDef(const std::string& world, const std::vector<std::string>& blobs, int num_devices) {
  std::vector<std::string> inputs{world};
  inputs.insert(inputs.end(), blobs.begin(), blobs.end());
  return MakeOperatorDef("Broadcast", inputs, blobs, {Arg("num_devices", int64_t{num_devices})});
}

LOCKSTEP_OPERATOR_SCHEMA(Allreduce)
    .SetDoc(
        "Every output gets the sum over all devices (and processes) of its blob; a device's blobs travel "
        "as one contiguous bucket.")
    .Include(DeclareCollective)
    .Output(0, "sums...", "one per blob, in the same order; may be the blobs themselves")
    .Arg(
        "wire_dtype", ArgType::kString, "float",
        "the dtype the sums cross processes (or GPUs, over NCCL) in: float, or bfloat16 / float16, summed in "
        "float32 at every hop");
LOCKSTEP_OPERATOR_SCHEMA(Broadcast)
    .SetDoc("Every output gets device 0's blob (of the communicator's rank 0).")
    .Include(DeclareCollective)
    .Output(0, "blobs...", "one per blob, in the same order; may be the blobs themselves");
LOCKSTEP_REGISTER_CPU_OPERATOR(Allreduce, AllreduceOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(Broadcast, BroadcastOp);
LOCKSTEP_NO_GRADIENT(Allreduce);
LOCKSTEP_NO_GRADIENT(Broadcast);

}  // namespace lockstep
