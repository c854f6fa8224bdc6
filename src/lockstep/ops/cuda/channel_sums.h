// Per-channel sums of a plain (N, C, spatial...) tensor on a CUDA device, for operators whose bias gradient
// is such a sum (cuDNN's cudnnConvolutionBackwardBias does not take bfloat16).
#pragma once

#include "lockstep/core/net_def.h"
#include "lockstep/core/tensor.h"

namespace lockstep::cuda {

class CudaContext;

// sums (C), in dy's dtype, gets dy summed over N and the spatial positions: in double, in a fixed order (the
// same result every run), rounded once. dy is float32, float16 or bfloat16 with at least one element; the
// work is queued on the context's stream.
void SumPerChannel(const OperatorDef& def, CudaContext& context, const Tensor& dy, Tensor* sums);

}  // namespace lockstep::cuda
