// ReLUs folded into the op next to them on CPUs, once the backward pass is built. A Conv or Add then Relu
// becomes one Conv or Add with relu=1 (a ResNet's residual block ends so, LeNet's convolutions too); at every
// residual block's input, the Sum of the two partial gradients and the ReluGradient that reads it become one
// SumReluGradient; where a Relu's output goes to an AveragePool whose windows tile the plane (LeNet's), the
// pool's gradient and the ReluGradient that reads it become one AveragePoolReluGradient. Each saves a pass
// over an activation-sized tensor and gives the same bits.
#pragma once

#include <set>
#include <string>

#include "lockstep.pb.h"

namespace lockstep {

// Fuses where the intermediate blob (the Conv's or Add's output, the Sum's) is read by the ReLU op alone and
// is not in `keep` (blobs callers read after a step), and no op between the pair touches what the fused op
// reads or writes at its new place. Ops on GPUs are left alone. Returns the number of pairs fused.
int FuseRelus(NetDef* net, const std::set<std::string>& keep);

}  // namespace lockstep
