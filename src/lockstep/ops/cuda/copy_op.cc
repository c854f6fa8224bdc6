// Copy on a CUDA device: y (in this device's memory) = x from any memory, host or another GPU. It is the op
// that InsertCopies places at every boundary of a model split over GPUs.
#include "lockstep/core/operator.h"

namespace lockstep {
namespace {

class CudaCopyOp : public Operator {
 public:
  using Operator::Operator;
  // Input() brings x into this device's memory (plain, ordered with the other device's stream).
  void Run() override { Output(0)->CopyFrom(Input(0)); }
};

}  // namespace

LOCKSTEP_REGISTER_CUDA_OPERATOR(Copy, CudaCopyOp);

}  // namespace lockstep
