// The fills (ConstantFill, GivenTensorFill, GaussianFill, UniformFill, XavierFill, MSRAFill) on CUDA
// devices: each runs the CPU fill into a host tensor and copies it to the device, so a model initialised on a
// GPU holds exactly the values it would on a CPU with the same seeds. Fills run once, at initialisation, so
// the copy costs nothing per step.
#include "lockstep/core/operator.h"

namespace lockstep {
namespace {

OperatorDef OnHost(OperatorDef def) {
  SetDevice(&def, Device{DeviceType::kCpu, 0});  // keeps the device option's random_seed
  return def;
}

class CudaFillOp : public Operator {
 public:
  // The CPU fill checks the arguments (with its own messages) and owns the generator, so a re-run continues
  // the sequence as on the CPU.
  CudaFillOp(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), host_fill_(CreateOperator(OnHost(def), &host_ws_)) {}

  void Run() override {
    if (InputSize() > 0) {
      // The output takes the input's shape; the CPU fill reads nothing else of it, so it gets a byte tensor
      // of that shape instead of a copy of the values.
      host_ws_.CreateBlob(InputName(0))->Resize(Input(0).shape(), DataType::kUInt8);
    }
    host_fill_->Run();
    Output(0)->CopyFrom(host_ws_.Blob(def_.output(0)));  // out has the fill's shape and dtype
  }

 private:
  Workspace host_ws_;  // holds the CPU fill's input stand-in and its output, in host memory
  std::unique_ptr<Operator> host_fill_;
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(ConstantFill, CudaFillOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(GivenTensorFill, CudaFillOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(GaussianFill, CudaFillOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(UniformFill, CudaFillOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(XavierFill, CudaFillOp);
LOCKSTEP_REGISTER_CUDA_OPERATOR(MSRAFill, CudaFillOp);

}  // namespace lockstep
