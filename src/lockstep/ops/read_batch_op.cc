// ReadBatch: () -> (data, label). Reads this replica's slice of the next global batch from the BatchReader
// the workspace holds under arg `reader`; arg `replica` says which slice. Running it is what advances the
// stream. The reader is looked up on every run, so a reader that CreateDB replaces (a restarted stream) is
// the one read next, and the op holds no reader between runs (LevelDB allows one open of a database at a
// time). The reader fills host tensors: on a CPU device the outputs themselves, on a CUDA device host buffers
// kept across steps, then copied to the device (one class serves both).
#include "lockstep/core/gradient.h"
#include "lockstep/core/operator.h"
#include "lockstep/data/batch_reader.h"

namespace lockstep {
namespace {

class ReadBatchOp : public Operator {
 public:
  ReadBatchOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), replica_(static_cast<int>(IntArg("replica"))) {
    if (!HasArgument(def, "reader")) FailOperator(def, "needs arg reader: the name of CreateDB's output");
    reader_name_ = StringArg("reader");
    Reader();  // the reader must exist when the op is created, so a wrong name or replica fails early
  }

  void Run() override {
    // data is (b, C, H, W) float, label is (b) int32
    std::shared_ptr<BatchReader> reader = Reader();
    if (device().type == DeviceType::kCpu) return reader->Read(replica_, Output(0), Output(1));
    reader->Read(replica_, &host_data_, &host_label_);
    Output(0)->CopyFrom(host_data_);
    Output(1)->CopyFrom(host_label_);
  }

 private:
  std::shared_ptr<BatchReader> Reader() const {
    std::shared_ptr<BatchReader> reader = ws_->FindObject<BatchReader>(reader_name_);
    if (!reader) FailOperator(def_, NoReaderMessage(reader_name_));
    if (replica_ < 0 || replica_ >= reader->replicas())
      FailOperator(def_, fmt::format("replica {} is outside the {} replicas of reader '{}'; create it with "
                                     "CreateDB's num_replicas as large as the replicas that read it",
                                     replica_, reader->replicas(), reader_name_));
    return reader;
  }

  std::string reader_name_;
  int replica_;
  Tensor host_data_, host_label_;  // a CUDA device's slice as read, in host memory
};

}  // namespace

LOCKSTEP_OPERATOR_SCHEMA(ReadBatch)
    .SetDoc(
        "Reads this replica's slice of the next global batch from a CreateDB reader; running it advances "
        "the stream.")
    .Output(0, "data", "(b, C, H, W) float")
    .Output(1, "label", "(b) int32")
    .Arg("reader", ArgType::kString, "required: the workspace object CreateDB wrote (its output's name)")
    .Arg("replica", ArgType::kInt, 0, "which replica's slice of each global batch")
    .Min(0);
LOCKSTEP_REGISTER_CPU_OPERATOR(ReadBatch, ReadBatchOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(ReadBatch, ReadBatchOp);
LOCKSTEP_NO_GRADIENT(ReadBatch);

}  // namespace lockstep
