// What the batch-normalization ops share about X's channels: the check of X against its per-channel tensors,
// the default epsilon, and where channel c's elements lie in X's plain or channel-blocked oneDNN layout.
#pragma once

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "lockstep.pb.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

// The default of arg epsilon (Caffe2's), added to the variance before its inverse square root, in the schemas
// of the ops that normalize.
constexpr float kDefaultEpsilon = 1e-5f;

// Checks that X is (N, C) or (N, C, H, W) (up to three spatial dims) and that each listed per-channel input
// (given as input index and shape) is (C); returns C. Throws InvalidInput naming the operator.
int64_t ChannelCount(const OperatorDef& def, const Shape& x,
                     const std::vector<std::pair<int, const Shape*>>& per_channel);

// An (N, C, spatial...) tensor seen as N x blocks x S x block, S the flattened spatial size: element (n, c,
// s) lies at n * batch_stride + (c / block) * block_stride + s * spatial_stride + c % block. Plain NCHW has
// block 1, oneDNN's nChw16c block 16; the channels past C in the last block are padding.
struct ChannelView {
  static constexpr int64_t kMaxBlock = 16;

  int64_t batch = 0, channels = 0, spatial = 1, block = 1;
  int64_t batch_stride = 0, block_stride = 0, spatial_stride = 0;

  int64_t NumBlocks() const { return (channels + block - 1) / block; }
  // The real (not padding) channels of block b.
  int64_t ChannelsIn(int64_t b) const { return std::min(block, channels - b * block); }
  // Where block b of sample n at spatial index s starts; its channels follow contiguously.
  int64_t Offset(int64_t n, int64_t b, int64_t s) const {
    return n * batch_stride + b * block_stride + s * spatial_stride;
  }
};

// `tensor` itself when its layout has the form of a ChannelView, else its plain copy written into `plain`
// (a rare layout costs a conversion, never a different result); sets *view to match what it returns.
const Tensor& ChannelAddressable(const Tensor& tensor, Tensor* plain, ChannelView* view);

}  // namespace lockstep
