// Collective operators over the devices of a data-parallel model, through the Communicator the workspace
// holds under the name in arg `communicator`. Inputs are grouped by device: with num_devices = k and m blobs
// per device, input d * m + j is blob j of device d; output i is where input i's result goes (the same blob
// when computed in place).
//   Allreduce: every output gets the sum of blob j over all devices (and all processes). A device's m blobs
//              travel as one contiguous bucket, so one collective serves many small gradients.
//   Broadcast: every output gets device 0's blob j (of the communicator's rank 0).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "lockstep/comm/communicator.h"
#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/collective_op.h"

namespace lockstep {

int CollectiveBlobsPerDevice(const OperatorDef& def, int num_devices) {
  const int inputs = def.input_size(), outputs = def.output_size();
  if (num_devices < 1 || inputs % num_devices != 0 || inputs != outputs)
    throw InvalidInput(
        fmt::format("{}: needs the same number of inputs and outputs, a multiple of "
                    "num_devices={}, got {} and {}",
                    DescribeOperator(def), num_devices, inputs, outputs));
  return inputs / num_devices;
}

void CheckReplicaMatches(const OperatorDef& def, int j, const Tensor& first, int i, const Tensor& replica) {
  if (replica.shape() != first.shape() || replica.dtype() != first.dtype())
    throw InvalidInput(fmt::format("{}: '{}' is {} {} but '{}' is {} {}; replicas must match",
                                   DescribeOperator(def), def.input(j), DataTypeName(first.dtype()),
                                   ShapeToString(first.shape()), def.input(i), DataTypeName(replica.dtype()),
                                   ShapeToString(replica.shape())));
}

BucketLayout PlanBucketLayout(const OperatorDef& def, const std::vector<const Tensor*>& outputs) {
  BucketLayout layout;
  for (size_t j = 0; j < outputs.size(); ++j) {
    const Tensor& blob = *outputs[j];
    if (blob.dtype() != DataType::kFloat || !blob.is_plain())
      throw InvalidInput(fmt::format("{}: '{}' is {}{}; Allreduce sums plain float tensors",
                                     DescribeOperator(def), def.input(j), DataTypeName(blob.dtype()),
                                     blob.is_plain() ? "" : " in a blocked layout"));
    layout.shapes.push_back(blob.shape());
    layout.offsets.push_back(layout.bytes);
    layout.bytes += (blob.nbytes() + 63) / 64 * 64;
  }
  return layout;
}

void CheckBucketBlob(const OperatorDef& def, const BucketLayout& layout, int j, const Tensor& blob) {
  if (blob.shape() != layout.shapes[j] || blob.dtype() != DataType::kFloat || !blob.is_plain())
    throw InvalidInput(fmt::format("{}: '{}' changed from plain float {} to {} {} between steps",
                                   DescribeOperator(def), def.input(j), ShapeToString(layout.shapes[j]),
                                   DataTypeName(blob.dtype()), ShapeToString(blob.shape())));
}

void CheckBroadcastBlob(const OperatorDef& def, int j, const Tensor& blob) {
  if (!blob.is_plain())
    throw InvalidInput(fmt::format("{}: '{}' is not plain; broadcast parameters and state only",
                                   DescribeOperator(def), def.input(j)));
}

namespace {

class CollectiveOp : public Operator {
 public:
  CollectiveOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws),
        communicator_(ws->GetObject<Communicator>(StringArg("communicator", ""))),
        num_devices_(static_cast<int>(IntArg("num_devices", 1))) {
    per_device_ = CollectiveBlobsPerDevice(def, num_devices_);
  }

 protected:
  // Checks that blob j has the same shape and dtype on every device and makes each output its input's shape.
  void PrepareOutputs() {
    for (int j = 0; j < per_device_; ++j) {
      const Tensor& first = Input(j);
      for (int d = 0; d < num_devices_; ++d) {
        int i = d * per_device_ + j;
        const Tensor& in = Input(i);
        CheckReplicaMatches(def_, j, first, i, in);
        if (!IsInplace(i, i)) Output(i)->CopyFrom(in);
      }
    }
  }

  std::shared_ptr<Communicator> communicator_;
  int num_devices_, per_device_ = 0;
};

// A device's blobs live in one bucket buffer: on the first run the op moves them there
// (Tensor::ShareStorage), so the gradient ops of later steps write straight into the bucket and the reduction
// needs no copies. A blob that an op has since reallocated is copied in and out instead, and moved back.
class AllreduceOp : public CollectiveOp {
 public:
  using CollectiveOp::CollectiveOp;

  void Run() override {
    PrepareOutputs();
    if (buckets_.empty()) PlanBuckets();
    for (int d = 0; d < num_devices_; ++d) {
      for (int j = 0; j < per_device_; ++j) {
        Tensor* blob = Output(d * per_device_ + j);
        CheckBucketBlob(def_, layout_, j, *blob);
        uint8_t* slice = buckets_[d].get() + layout_.offsets[j];
        if (blob->raw_data() != slice) {
          std::memcpy(slice, blob->raw_data(), blob->nbytes());
          blob->ShareStorage(buckets_[d], layout_.offsets[j], blob->nbytes());
        }
      }
    }
    communicator_->Allreduce(buffers_, layout_.bytes / sizeof(float));
  }

 private:
  void PlanBuckets() {
    std::vector<const Tensor*> blobs;
    for (int j = 0; j < per_device_; ++j) blobs.push_back(Output(j));
    layout_ = PlanBucketLayout(def_, blobs);
    for (int d = 0; d < num_devices_; ++d) {
      auto* memory = static_cast<uint8_t*>(std::aligned_alloc(64, std::max<size_t>(layout_.bytes, 64)));
      LOCKSTEP_ENFORCE(memory != nullptr, "out of memory for a {}-byte gradient bucket", layout_.bytes);
      std::memset(memory, 0, layout_.bytes);
      buckets_.emplace_back(memory, [](uint8_t* p) { std::free(p); });
      buffers_.push_back(reinterpret_cast<float*>(memory));
    }
  }

  BucketLayout layout_;
  std::vector<std::shared_ptr<uint8_t>> buckets_;  // one contiguous buffer per device
  std::vector<float*> buffers_;                    // the same, as the communicator takes them
};

class BroadcastOp : public CollectiveOp {
 public:
  using CollectiveOp::CollectiveOp;

  void Run() override {
    PrepareOutputs();
    for (int j = 0; j < per_device_; ++j) {
      std::vector<void*> buffers(num_devices_);
      for (int d = 0; d < num_devices_; ++d) {
        Tensor* blob = Output(d * per_device_ + j);
        CheckBroadcastBlob(def_, j, *blob);
        buffers[d] = blob->raw_data();
      }
      communicator_->Broadcast(buffers, Output(j)->nbytes(), 0);
    }
  }
};

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(Allreduce)
    .NumInputs(1, INT_MAX)
    .NumOutputs(1, INT_MAX)
    .AllowInplaceSameIndex()
    .IdentityShape()
    .Collective();
LOCKSTEP_OPERATOR_SCHEMA(Broadcast)
    .NumInputs(1, INT_MAX)
    .NumOutputs(1, INT_MAX)
    .AllowInplaceSameIndex()
    .IdentityShape()
    .Collective();
LOCKSTEP_REGISTER_CPU_OPERATOR(Allreduce, AllreduceOp);
LOCKSTEP_REGISTER_CPU_OPERATOR(Broadcast, BroadcastOp);
LOCKSTEP_NO_GRADIENT(Allreduce);
LOCKSTEP_NO_GRADIENT(Broadcast);

}  // namespace lockstep
