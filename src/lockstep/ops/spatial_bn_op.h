// SpatialBN's and SpatialBNGradient's argument, input and output checks, shared by the CPU and CUDA
// operators so that both accept the same nets and report the same errors.
#pragma once

#include <array>
#include <cstdint>

#include "lockstep.pb.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

// Y alone in test mode; in training Y, running_mean, running_var, saved_mean, saved_var and, with relu=1,
// the ReLU mask. Throws InvalidInput naming the operator when def has another number of outputs; returns it.
int SpatialBNNumOutputs(const OperatorDef& def);

// With 7 inputs, training takes the batch statistics from inputs 5 and 6: the per-channel sums of X and of
// X^2 over the batches of num_batches equal-sized replicas (ChannelStats on each, then an Allreduce), so
// every replica normalizes with the statistics of the whole batch. Checks that form; returns whether def has
// it.
bool CombinesStatistics(const OperatorDef& def);

// SpatialBNGradient's checks of relu, is_test and its input count, and of arg `gradients`, which lists which
// of dX (0), dscale (1), dbias (2) are outputs, in that order. Returns each gradient's output index, or -1
// where it is not an output.
std::array<int, 3> SpatialBNGradientOutputs(const OperatorDef& def);

// SpatialBNGradient's C: checks X against scale, saved_mean and saved_var (see ChannelCount) and dY against
// X.
int64_t SpatialBNGradientChannels(const OperatorDef& def, const Shape& x, const Shape& scale,
                                  const Shape& saved_mean, const Shape& saved_var, const Shape& dy);

}  // namespace lockstep
