// Window geometry shared by Conv and the pooling operators on every device: kernel, stride, padding and
// dilation read from Caffe2's argument spellings, the output size that geometry gives, and each operator
// family's checks of its arguments and shapes.
#pragma once

#include <cstdint>
#include <utility>

#include "lockstep.pb.h"
#include "lockstep/core/schema.h"
#include "lockstep/core/tensor.h"

namespace lockstep {

// The arguments ParseConvPoolArgs and ParsePoolArgs read, with their defaults and bounds, for the schemas'
// Include(): the window (kernel, stride, pad in their three spellings, order, legacy_pad), then Conv's
// dilation and group, or pooling's global_pooling.
void DeclareConvArgs(OpSchema& schema);
void DeclarePoolArgs(OpSchema& schema);

struct ConvPoolArgs {
  int64_t kernel_h = 0, kernel_w = 0;  // 0 when not given: Conv then takes them from the filter
  int64_t stride_h = 0, stride_w = 0;
  int64_t pad_t = 0, pad_l = 0, pad_b = 0, pad_r = 0;
  int64_t dilation_h = 1, dilation_w = 1;  // pooling windows are dense
  bool global_pooling = false;

  bool has_kernel() const { return kernel_h > 0; }
};

// Accepts `kernel` | `kernel_h`+`kernel_w` | `kernels`, the same three forms for `stride` and `dilation`, and
// `pad` | `pad_t/l/b/r` | `pads` = [t, l, b, r]. Throws InvalidInput naming the operator on a bad value or
// on an `order` other than NCHW. Conv's: pooling has no dilation.
ConvPoolArgs ParseConvPoolArgs(const OperatorDef& def);

// (OH, OW) of the window sweep over an (H, W) input: floor((H + pt + pb - d*(k-1) - 1) / s) + 1.
// Throws InvalidInput naming the operator when the dilated window does not fit the padded input.
std::pair<int64_t, int64_t> ConvPoolOutputSize(const OperatorDef& def, const ConvPoolArgs& args,
                                               int64_t height, int64_t width);

// Conv's Y shape (N, M, OH, OW) from x (N, C, H, W), filter (M, C/group, kh, kw) and, when given, bias (M).
// Throws InvalidInput naming the operator when the shapes, group and kernel do not fit together.
Shape ConvOutputShape(const OperatorDef& def, const ConvPoolArgs& args, int64_t group, const Shape& x,
                      const Shape& filter, const Shape* bias);

// The window arguments of pooling, with its checks: either global_pooling without kernel, stride and pad, or
// a kernel larger than each pad.
ConvPoolArgs ParsePoolArgs(const OperatorDef& def);

// The pooling window over an x of (N, C, H, W): global pooling takes the whole (H, W). Throws InvalidInput
// naming the operator when x is not 4-D.
ConvPoolArgs PoolWindow(const OperatorDef& def, const ConvPoolArgs& args, const Shape& x);

// True when pooling's windows tile the plane: no two overlap and none reaches into padding (global pooling,
// or a kernel equal to its stride without padding), so that each input element is in one window at most.
bool PoolWindowsTile(const ConvPoolArgs& args);

// Pooling's Y shape (N, C, OH, OW) for an x of (N, C, H, W) and the window PoolWindow gave.
Shape PoolOutputShape(const OperatorDef& def, const ConvPoolArgs& window, const Shape& x);

}  // namespace lockstep
