// ReadBatch on CUDA devices: () -> (data, label), as ops/read_batch_op.cc defines it. The replica's slice
// comes from the workspace's BatchReader (arg `reader`, arg `replica`) into host tensors, whose buffers are
// kept across steps, and is then copied into the device's memory.
#include "lockstep/core/operator.h"
#include "lockstep/data/batch_reader.h"

namespace lockstep {
namespace {

class CudaReadBatchOp : public Operator {
 public:
  CudaReadBatchOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws),
        reader_(ws->GetObject<BatchReader>(StringArg("reader", ""))),
        replica_(static_cast<int>(IntArg("replica", 0))) {
    if (replica_ < 0 || replica_ >= reader_->replicas())
      throw InvalidInput(fmt::format("{}: replica {} is outside the reader's {} replicas",
                                     DescribeOperator(def), replica_, reader_->replicas()));
  }

  void Run() override {
    // data is (b, C, H, W) float (or what the reader's source fills), label is (b) int32
    reader_->Read(replica_, &host_data_, &host_label_);
    // From pageable memory: the host tensors are free for the next step when the copies return.
    Output(0)->CopyFrom(host_data_);
    Output(1)->CopyFrom(host_label_);
  }

 private:
  std::shared_ptr<BatchReader> reader_;
  int replica_;
  Tensor host_data_, host_label_;  // the slice as read, in host memory
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(ReadBatch, CudaReadBatchOp);

}  // namespace lockstep
