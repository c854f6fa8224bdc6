// Activations recomputed in the backward pass instead of kept from the forward pass. relu(BN(X)) is cheap
// to compute again from X, which batch normalization's gradient keeps anyway, so keeping it between the
// passes only costs memory: a convolution's input, it would otherwise live from the forward pass until
// that convolution's gradient.
#pragma once

#include "lockstep.pb.h"

namespace lockstep {

// For every training SpatialBN with relu=1 whose output a gradient op reads, inserts before the first such
// op a SpatialBN that normalizes X again with the batch's saved statistics (is_test=1, relu=1: the same
// values, bit for bit) into "<output>_recomputed", which the gradient ops then read instead. Returns how
// many outputs it recomputes.
int RecomputeNormalizedActivations(NetDef* net);

}  // namespace lockstep
