// MomentumSGDUpdate's arguments, input checks and operator base class, shared by the CPU and CUDA operators.
#pragma once

#include "lockstep.pb.h"
#include "lockstep/core/operator.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

struct MomentumSGDArgs {
  float momentum;      // arg momentum, default 0
  bool nesterov;       // arg nesterov, default 0
  float weight_decay;  // arg weight_decay (L2), default 0
};

MomentumSGDArgs ParseMomentumSGDArgs(const OperatorDef& def);

// Checks that moment and param are float32 of grad's shape and that lr is one float. Throws InvalidInput
// naming the operator.
void CheckMomentumSGDInputs(const OperatorDef& def, const Tensor& grad, const Tensor& moment,
                            const Tensor& lr, const Tensor& param);

// The operator class both devices derive from: the arguments, read once, and the four inputs.
class MomentumSGDUpdateBase : public Operator {
 public:
  MomentumSGDUpdateBase(const OperatorDef& def, Workspace* ws)
      : Operator(def, ws), args_(ParseMomentumSGDArgs(def)) {}

 protected:
  struct Inputs {
    const Tensor& grad;    // any shape
    const Tensor& moment;  // grad's shape; output 1 is the same blob
    const Tensor& lr;      // a float scalar, positive
    const Tensor& param;   // grad's shape; output 2 is the same blob
  };
  Inputs ReadInputs() { return {Input(0), Input(1), Input(2), Input(3)}; }

  const MomentumSGDArgs args_;
};

}  // namespace lockstep
