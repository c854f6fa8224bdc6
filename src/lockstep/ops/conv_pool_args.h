// Window geometry shared by Conv and the pooling operators: kernel, stride, padding and dilation read from
// Caffe2's argument spellings, and the output size that geometry gives.
#pragma once

#include <cstdint>
#include <utility>

#include "lockstep.pb.h"

namespace lockstep {

struct ConvPoolArgs {
  int64_t kernel_h = 0, kernel_w = 0;  // 0 when not given: Conv then takes them from the filter
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_t = 0, pad_l = 0, pad_b = 0, pad_r = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  bool global_pooling = false;

  bool has_kernel() const { return kernel_h > 0; }
};

// Accepts `kernel` | `kernel_h`+`kernel_w` | `kernels`, the same three forms for `stride` and `dilation`, and
// `pad` | `pad_t/l/b/r` | `pads` = [t, l, b, r]. Throws InvalidInput naming the operator on a bad value or
// on an `order` other than NCHW.
ConvPoolArgs ParseConvPoolArgs(const OperatorDef& def);

// (OH, OW) of the window sweep over an (H, W) input: floor((H + pt + pb - d*(k-1) - 1) / s) + 1.
// Throws InvalidInput naming the operator when the dilated window does not fit the padded input.
std::pair<int64_t, int64_t> ConvPoolOutputSize(const OperatorDef& def, const ConvPoolArgs& args,
                                               int64_t height, int64_t width);

}  // namespace lockstep
