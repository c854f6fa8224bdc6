// Parsing of Caffe2's convolution and pooling window arguments.
#include "lockstep/ops/conv_pool_args.h"

#include <string>
#include <vector>

#include "lockstep/core/enforce.h"
#include "lockstep/core/net_def.h"

namespace lockstep {
namespace {

// Reads an (h, w) pair spelled `name`, `name_h` and `name_w`, or the two-element list `plural`.
void ReadPair(const OperatorDef& def, const std::string& name, const std::string& plural, int64_t* h,
              int64_t* w) {
  bool single = HasArgument(def, name);
  bool split = HasArgument(def, name + "_h") || HasArgument(def, name + "_w");
  bool list = HasArgument(def, plural);
  if (single + split + list > 1)
    FailOperator(def, fmt::format("give only one of '{0}', '{0}_h/_w' and '{1}'", name, plural));
  if (single) {
    *h = *w = GetIntArgument(def, name, 0);
  } else if (split) {
    if (!HasArgument(def, name + "_h") || !HasArgument(def, name + "_w"))
      FailOperator(def, fmt::format("'{0}_h' and '{0}_w' must be given together", name));
    *h = GetIntArgument(def, name + "_h", 0);
    *w = GetIntArgument(def, name + "_w", 0);
  } else if (list) {
    auto values = GetIntsArgument(def, plural);
    if (values.size() != 2)
      FailOperator(def,
                   fmt::format("'{}' needs 2 values (h, w) for 2-D inputs, got {}", plural, values.size()));
    *h = values[0];
    *w = values[1];
  }
}

}  // namespace

ConvPoolArgs ParseConvPoolArgs(const OperatorDef& def) {
  ConvPoolArgs args;
  std::string order = GetStringArgument(def, "order", "NCHW");
  if (order != "NCHW")
    FailOperator(def, fmt::format("order '{}' is not supported; lockstep tensors are NCHW", order));
  if (GetIntArgument(def, "legacy_pad", 0) != 0)
    FailOperator(def, "'legacy_pad' is not supported; give explicit pads");

  ReadPair(def, "kernel", "kernels", &args.kernel_h, &args.kernel_w);
  ReadPair(def, "stride", "strides", &args.stride_h, &args.stride_w);
  ReadPair(def, "dilation", "dilations", &args.dilation_h, &args.dilation_w);

  bool single = HasArgument(def, "pad");
  bool split = HasArgument(def, "pad_t") || HasArgument(def, "pad_l") || HasArgument(def, "pad_b") ||
               HasArgument(def, "pad_r");
  bool list = HasArgument(def, "pads");
  if (single + split + list > 1) FailOperator(def, "give only one of 'pad', 'pad_t/l/b/r' and 'pads'");
  if (single) {
    args.pad_t = args.pad_l = args.pad_b = args.pad_r = GetIntArgument(def, "pad", 0);
  } else if (split) {
    args.pad_t = GetIntArgument(def, "pad_t", 0);
    args.pad_l = GetIntArgument(def, "pad_l", 0);
    args.pad_b = GetIntArgument(def, "pad_b", 0);
    args.pad_r = GetIntArgument(def, "pad_r", 0);
  } else if (list) {
    auto pads = GetIntsArgument(def, "pads");
    if (pads.size() != 4)
      FailOperator(def,
                   fmt::format("'pads' needs 4 values (t, l, b, r) for 2-D inputs, got {}", pads.size()));
    args.pad_t = pads[0];
    args.pad_l = pads[1];
    args.pad_b = pads[2];
    args.pad_r = pads[3];
  }
  args.global_pooling = GetIntArgument(def, "global_pooling", 0) != 0;

  bool kernel_given =
      HasArgument(def, "kernel") || HasArgument(def, "kernel_h") || HasArgument(def, "kernels");
  if (kernel_given && (args.kernel_h <= 0 || args.kernel_w <= 0))
    FailOperator(def, fmt::format("kernel must be positive, got {}x{}", args.kernel_h, args.kernel_w));
  if (args.stride_h <= 0 || args.stride_w <= 0)
    FailOperator(def, fmt::format("stride must be positive, got {}x{}", args.stride_h, args.stride_w));
  if (args.dilation_h <= 0 || args.dilation_w <= 0)
    FailOperator(def, fmt::format("dilation must be positive, got {}x{}", args.dilation_h, args.dilation_w));
  if (args.pad_t < 0 || args.pad_l < 0 || args.pad_b < 0 || args.pad_r < 0)
    FailOperator(def, fmt::format("pads must be non-negative, got (t {}, l {}, b {}, r {})", args.pad_t,
                                  args.pad_l, args.pad_b, args.pad_r));
  return args;
}

std::pair<int64_t, int64_t> ConvPoolOutputSize(const OperatorDef& def, const ConvPoolArgs& args,
                                               int64_t height, int64_t width) {
  int64_t window_h = args.dilation_h * (args.kernel_h - 1) + 1;
  int64_t window_w = args.dilation_w * (args.kernel_w - 1) + 1;
  int64_t padded_h = height + args.pad_t + args.pad_b;
  int64_t padded_w = width + args.pad_l + args.pad_r;
  if (window_h > padded_h || window_w > padded_w)
    FailOperator(
        def,
        fmt::format("the {}x{} window (kernel {}x{}, dilation {}x{}) does not fit the {}x{} padded input",
                    window_h, window_w, args.kernel_h, args.kernel_w, args.dilation_h, args.dilation_w,
                    padded_h, padded_w));
  return {(padded_h - window_h) / args.stride_h + 1, (padded_w - window_w) / args.stride_w + 1};
}

}  // namespace lockstep
