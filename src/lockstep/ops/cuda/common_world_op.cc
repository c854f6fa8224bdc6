// CreateCommonWorld on CUDA devices, with the inputs, outputs and argument of the CPU op
// (ops/common_world_op.cc): the communicator of CUDA devices `devices` (comm/cuda/cuda_communicator.h), NCCL
// on distinct GPUs, else copy-and-sum. Given the shards' communicator, which sums host memory, each
// collective is staged through it: the devices' sum on device 0, to host memory, across the shards, back and
// out to the devices. A CudaCommunicator given as the shards' serves the devices itself and is the world as
// it is.
#include "lockstep/comm/cuda/cuda_communicator.h"
#include "lockstep/core/operator.h"
#include "lockstep/ops/collective_op.h"

namespace lockstep {
namespace {

class CudaCreateCommonWorldOp : public Operator {
 public:
  CudaCreateCommonWorldOp(const OperatorDef& def, Workspace* ws) : Operator(def, ws) {
    for (int64_t device : IntsArg("devices")) devices_.push_back(static_cast<int>(device));
    if (devices_.empty())
      FailOperator(def, fmt::format("needs the CUDA devices it serves, e.g. devices = [0, 1]"));
    if (IntArg("channel") != 0)
      FailOperator(def, "communicator channels serve CPU devices; CUDA collectives use one communicator");
  }

  void Run() override {
    std::shared_ptr<CudaCommunicator> world;
    if (InputSize() == 0) {
      world = MakeCudaCommunicator(devices_);
    } else {
      std::shared_ptr<Communicator> shards = ShardCommunicatorInput(def_, *ws_);
      world = std::dynamic_pointer_cast<CudaCommunicator>(shards);
      if (world && world->devices() != devices_)
        FailOperator(def_, fmt::format("the communicator serves CUDA devices {} but the replicas are on {}",
                                       fmt::join(world->devices(), ", "), fmt::join(devices_, ", ")));
      if (!world) world = MakeCudaCommunicator(MakeCudaCommunicator(devices_), shards);
    }
    ws_->SetObject<Communicator>(def_.output(0), world);
  }

 private:
  std::vector<int> devices_;
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(CreateCommonWorld, CudaCreateCommonWorldOp);

}  // namespace lockstep
