// Collective operators over the devices of a data-parallel model, through the Communicator the workspace
// holds under the name in arg `communicator`. Inputs are grouped by device: with num_devices = k and m blobs
// per device, input d * m + j is blob j of device d; output i is where input i's result goes (the same blob
// when computed in place).
//   Allreduce: every output gets the sum of blob j over all devices (and all processes). A device's m blobs
//              travel as one contiguous bucket, so one collective serves many small gradients.
//   Broadcast: every output gets device 0's blob j (of the communicator's rank 0).
#include <cstring>

#include "lockstep/comm/communicator.h"
#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"

namespace lockstep {
namespace {

class CollectiveOp : public Operator {
 public:
  CollectiveOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws),
        communicator_(ws->GetObject<Communicator>(StringArg("communicator", ""))),
        num_devices_(static_cast<int>(IntArg("num_devices", 1))) {
    if (num_devices_ < 1 || InputSize() % num_devices_ != 0 || InputSize() != OutputSize())
      throw InvalidInput(
          fmt::format("{}: needs the same number of inputs and outputs, a multiple of "
                      "num_devices={}, got {} and {}",
                      DescribeOperator(def), num_devices_, InputSize(), OutputSize()));
    per_device_ = InputSize() / num_devices_;
  }

 protected:
  // Checks that blob j has the same shape and dtype on every device and makes each output its input's shape.
  void PrepareOutputs() {
    for (int j = 0; j < per_device_; ++j) {
      const Tensor& first = Input(j);
      for (int d = 0; d < num_devices_; ++d) {
        int i = d * per_device_ + j;
        const Tensor& in = Input(i);
        if (in.shape() != first.shape() || in.dtype() != first.dtype())
          throw InvalidInput(fmt::format("{}: '{}' is {} {} but '{}' is {} {}; replicas must match",
                                         DescribeOperator(def_), InputName(j), DataTypeName(first.dtype()),
                                         ShapeToString(first.shape()), InputName(i), DataTypeName(in.dtype()),
                                         ShapeToString(in.shape())));
        if (!IsInplace(i, i)) Output(i)->CopyFrom(in);
      }
    }
  }

  std::shared_ptr<Communicator> communicator_;
  int num_devices_, per_device_ = 0;
};

class AllreduceOp : public CollectiveOp {
 public:
  using CollectiveOp::CollectiveOp;

  void Run() override {
    PrepareOutputs();
    size_t count = 0;
    for (int j = 0; j < per_device_; ++j) {
      if (Output(j)->dtype() != DataType::kFloat)
        throw InvalidInput(fmt::format("{}: '{}' is {}; Allreduce sums float tensors", DescribeOperator(def_),
                                       InputName(j), DataTypeName(Output(j)->dtype())));
      count += Output(j)->numel();
    }
    std::vector<float*> buffers(num_devices_);
    if (per_device_ == 1) {
      for (int d = 0; d < num_devices_; ++d) buffers[d] = Output(d)->data<float>();
      communicator_->Allreduce(buffers, count);
      return;
    }
    buckets_.resize(num_devices_);
    for (int d = 0; d < num_devices_; ++d) {
      buckets_[d].resize(count);
      buffers[d] = buckets_[d].data();
      CopyBlobs(d, /*into_bucket=*/true);
    }
    communicator_->Allreduce(buffers, count);
    for (int d = 0; d < num_devices_; ++d) CopyBlobs(d, /*into_bucket=*/false);
  }

 private:
  void CopyBlobs(int device, bool into_bucket) {
    float* bucket = buckets_[device].data();
    for (int j = 0; j < per_device_; ++j) {
      Tensor* blob = Output(device * per_device_ + j);
      size_t bytes = blob->numel() * sizeof(float);
      if (into_bucket)
        std::memcpy(bucket, blob->data<float>(), bytes);
      else
        std::memcpy(blob->data<float>(), bucket, bytes);
      bucket += blob->numel();
    }
  }

  std::vector<std::vector<float>> buckets_;  // one contiguous buffer per device
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
        if (!blob->is_plain())
          throw InvalidInput(fmt::format("{}: '{}' is not plain; broadcast parameters and state only",
                                         DescribeOperator(def_), InputName(j)));
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
