// Allreduce and Broadcast on CUDA devices, with the inputs, outputs and arguments of the CPU ops
// (ops/collective_ops.cc): input 0 names the CudaCommunicator that CreateCommonWorld writes on a CUDA device
// (cuda/common_world_op.cc). Blob j of device d lives in the memory of the communicator's device d. The
// collectives are queued on the devices' streams, behind the ops that wrote the blobs, and the ops that read
// the results queue behind them.
#include <algorithm>

#include "lockstep/comm/cuda/cuda_communicator.h"
#include "lockstep/core/operator.h"
#include "lockstep/cuda/cuda_context.h"
#include "lockstep/ops/collective_op.h"

namespace lockstep {
namespace {

// The blobs are reached directly, not through Input() and Output(): those would move every device's blob
// into the memory of the op's own device (device 0).
class CudaCollectiveOp : public Operator {
 public:
  CudaCollectiveOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), num_devices_(static_cast<int>(IntArg("num_devices"))) {
    per_device_ = CollectiveBlobsPerDevice(def, num_devices_);
    for (int i = 1; i < def.input_size(); ++i) input_blobs_.push_back(ws->CreateBlob(def.input(i)));
    for (const auto& name : def.output()) output_blobs_.push_back(ws->CreateBlob(name));
  }

 protected:
  // Reads input 0, checking the communicator when it is not the one of the last run (param_init_net ran
  // again); returns whether it changed.
  bool ReadCommunicator() {
    std::shared_ptr<Communicator> current = CommunicatorInput(def_, *ws_);
    if (current == communicator_) return false;
    auto communicator = std::dynamic_pointer_cast<CudaCommunicator>(current);
    if (!communicator)
      FailOperator(
          def_, fmt::format("communicator '{}' sums host memory; CUDA devices need a CudaCommunicator (run "
                            "CreateCommonWorld on a CUDA device)",
                            InputName(0)));
    if (static_cast<int>(communicator->devices().size()) != num_devices_)
      FailOperator(def_, fmt::format("num_devices={} but communicator '{}' serves {} devices", num_devices_,
                                     InputName(0), communicator->devices().size()));
    communicator_ = communicator;
    return true;
  }

  // Blob i, which is input 1 + i.
  const Tensor& In(int i) const {
    if (!input_blobs_[i]->defined())
      FailOperator(def_,
                   fmt::format("input '{}' has not been set (feed it or run the net that fills it first)",
                               InputName(1 + i)));
    return *input_blobs_[i];
  }

  // Checks that blob j has the same shape and dtype on every device, each in its device's memory, and makes
  // each output a copy of its input (the same blob when in place).
  void PrepareOutputs() {
    for (int j = 0; j < per_device_; ++j) {
      const Tensor& first = In(j);
      for (int d = 0; d < num_devices_; ++d) {
        const int i = d * per_device_ + j;
        const Tensor& in = In(i);
        const Device device{DeviceType::kCuda, communicator_->devices()[d]};
        if (!(in.device() == device))
          FailOperator(def_, fmt::format("'{}' is in {} memory but device {} of the communicator is {}",
                                         InputName(1 + i), in.on_host() ? "host" : in.device().ToString(), d,
                                         device.ToString()));
        CheckReplicaMatches(def_, j, first, i, in);
        if (!IsInplace(1 + i, i)) {
          output_blobs_[i]->PlaceOn(device);
          output_blobs_[i]->CopyFrom(in);
        }
      }
    }
  }

  std::shared_ptr<CudaCommunicator> communicator_;
  int num_devices_, per_device_ = 0;
  std::vector<Tensor*> input_blobs_, output_blobs_;  // blob i's input and output
};

// As on the CPU, a device's blobs live in one bucket buffer, here in that device's memory: on the first run
// the op moves them there (Tensor::ShareStorage), so the gradient ops of later steps write straight into the
// bucket and one collective serves them all. A blob that an op has since reallocated is copied in and moved
// back.
class CudaAllreduceOp : public CudaCollectiveOp {
 public:
  using CudaCollectiveOp::CudaCollectiveOp;

  void Run() override {
    if (ReadCommunicator()) {  // the buckets live in the memory of its devices
      buckets_.clear();
      buffers_.clear();
    }
    PrepareOutputs();
    if (buckets_.empty()) AllocateBuckets();
    for (int d = 0; d < num_devices_; ++d) {
      cuda::CudaContext& context = cuda::ContextFor(communicator_->devices()[d]);
      for (int j = 0; j < per_device_; ++j) {
        Tensor* blob = output_blobs_[d * per_device_ + j];
        CheckBucketBlob(def_, bucket_, j, *blob);
        uint8_t* slice = buckets_[d].get() + bucket_.offsets[j];
        if (blob->raw_data() != slice) {
          // On the device's stream, behind the op that wrote the blob. Its old buffer goes back to the
          // device's cache, which hands it only to work queued after this copy.
          LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(slice, blob->raw_data(), blob->nbytes(),
                                              cudaMemcpyDeviceToDevice, context.stream()));
          blob->ShareStorage(buckets_[d], bucket_.offsets[j], blob->nbytes());
        }
      }
    }
    communicator_->AllreduceOverWire(buffers_, bucket_.bytes / sizeof(float), bucket_.wire);
  }

 private:
  void AllocateBuckets() {
    bucket_ = PlanDeviceBucket(
        def_, std::vector<const Tensor*>(output_blobs_.begin(), output_blobs_.begin() + per_device_));
    for (int d = 0; d < num_devices_; ++d) {
      cuda::CudaContext& context = cuda::ContextFor(communicator_->devices()[d]);
      buckets_.push_back(context.allocator().Allocate(std::max<size_t>(bucket_.bytes, 64)));
      LOCKSTEP_CUDA_CHECK(cudaMemsetAsync(buckets_.back().get(), 0, bucket_.bytes, context.stream()));
      buffers_.push_back(reinterpret_cast<float*>(buckets_.back().get()));
    }
  }

  GradientBucket bucket_;                          // the layout, the same on every device
  std::vector<std::shared_ptr<uint8_t>> buckets_;  // one contiguous buffer per device, in its memory
  std::vector<float*> buffers_;                    // the same, as the communicator takes them
};

class CudaBroadcastOp : public CudaCollectiveOp {
 public:
  using CudaCollectiveOp::CudaCollectiveOp;

  void Run() override {
    ReadCommunicator();
    PrepareOutputs();
    std::vector<void*> buffers(num_devices_);
    for (int j = 0; j < per_device_; ++j) {
      for (int d = 0; d < num_devices_; ++d) {
        Tensor* blob = output_blobs_[d * per_device_ + j];
        CheckBroadcastBlob(def_, j, *blob);
        buffers[d] = blob->raw_data();
      }
      communicator_->Broadcast(buffers, output_blobs_[j]->nbytes(), 0);
    }
  }
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(Allreduce, CudaAllreduceOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(Broadcast, CudaBroadcastOp);

}  // namespace lockstep
