// Activations recomputed in the backward pass instead of kept from the forward pass. relu(BN(X)) is cheap
// to compute again from X, which batch normalization's gradient keeps anyway, so keeping it between the
// passes only costs memory: a convolution's input, it would otherwise live from the forward pass until
// that convolution's gradient.
#pragma once

#include <set>
#include <string>

#include "lockstep.pb.h"

namespace lockstep {

// For every training SpatialBN with relu=1 on the CPU whose output or ReLU mask a gradient op reads,
// inserts before the first such op a SpatialBNReluAgain that computes both again from X and the batch's
// saved statistics (the same bits) into "<output>_recomputed" and "<mask>_recomputed", which the gradient
// ops then read instead. Returns the forward masks no op reads any more: scratch the forward op must
// write, which the memory plan may share (MemoryPlanOptions::scratch). (On GPUs the fused op's inference
// and training kernels are not known to agree to the bit, so they keep both.)
std::set<std::string> RecomputeNormalizedActivations(NetDef* net);

}  // namespace lockstep
