// ReLUs folded into the element-wise pass next to them on CPUs, once the backward pass is built. At the end
// of every residual block of a ResNet, Add then Relu becomes one Add with relu=1; at every block input, the
// Sum of the two partial gradients and the ReluGradient that reads it become one SumReluGradient. Each saves
// a pass over an activation-sized tensor and gives the same bits.
#pragma once

#include <set>
#include <string>

#include "lockstep.pb.h"

namespace lockstep {

// Fuses where the intermediate blob (the Add's output, the Sum's) is read by the ReLU op alone and is not in
// `keep` (blobs callers read after a step), and no op between the pair touches what the fused op reads or
// writes at its new place. Ops on GPUs are left alone. Returns the number of pairs fused.
int FuseRelus(NetDef* net, const std::set<std::string>& keep);

}  // namespace lockstep
