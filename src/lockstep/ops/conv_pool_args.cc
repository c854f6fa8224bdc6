// Parsing of Caffe2's convolution and pooling window arguments, and the shape checks Conv and pooling share
// across devices.
#include "lockstep/ops/conv_pool_args.h"

#include <optional>
#include <string>
#include <vector>

#include "lockstep/core/enforce.h"
#include "lockstep/core/schema.h"

namespace lockstep {
namespace {

// Reads an (h, w) pair spelled `name`, `name_h` and `name_w`, or the two-element list `plural`; when none is
// given, *h and *w get `name`'s default, or stay as they are when it has none.
void ReadPair(const OperatorDef& def, const std::string& name, const std::string& plural, int64_t* h,
              int64_t* w) {
  bool single = HasArgument(def, name);
  bool split = HasArgument(def, name + "_h") || HasArgument(def, name + "_w");
  bool list = HasArgument(def, plural);
  if (single + split + list > 1)
    FailOperator(def, fmt::format("give only one of '{0}', '{0}_h/_w' and '{1}'", name, plural));
  if (split) {
    if (!HasArgument(def, name + "_h") || !HasArgument(def, name + "_w"))
      FailOperator(def, fmt::format("'{0}_h' and '{0}_w' must be given together", name));
    *h = IntArg(def, name + "_h");
    *w = IntArg(def, name + "_w");
  } else if (list) {
    auto values = IntsArg(def, plural);
    if (values.size() != 2)
      FailOperator(def,
                   fmt::format("'{}' needs 2 values (h, w) for 2-D inputs, got {}", plural, values.size()));
    *h = values[0];
    *w = values[1];
  } else if (single || SchemaRegistry::Of(def).FindArg(name)->default_value) {
    *h = *w = IntArg(def, name);
  }
}

// The window arguments of Conv and pooling: all but dilation and global_pooling. The schemas bound each
// value (kernel and stride positive, pads not negative).
ConvPoolArgs ParseWindowArgs(const OperatorDef& def) {
  ConvPoolArgs args;
  if (IntArg(def, "legacy_pad") != 0) FailOperator(def, "'legacy_pad' is not supported; give explicit pads");

  ReadPair(def, "kernel", "kernels", &args.kernel_h, &args.kernel_w);
  ReadPair(def, "stride", "strides", &args.stride_h, &args.stride_w);

  bool split = HasArgument(def, "pad_t") || HasArgument(def, "pad_l") || HasArgument(def, "pad_b") ||
               HasArgument(def, "pad_r");
  bool list = HasArgument(def, "pads");
  if (HasArgument(def, "pad") + split + list > 1)
    FailOperator(def, "give only one of 'pad', 'pad_t/l/b/r' and 'pads'");
  if (split) {
    for (const char* side : {"pad_t", "pad_l", "pad_b", "pad_r"})
      if (!HasArgument(def, side))
        FailOperator(def, "'pad_t', 'pad_l', 'pad_b' and 'pad_r' must be given together");
    args.pad_t = IntArg(def, "pad_t");
    args.pad_l = IntArg(def, "pad_l");
    args.pad_b = IntArg(def, "pad_b");
    args.pad_r = IntArg(def, "pad_r");
  } else if (list) {
    auto pads = IntsArg(def, "pads");
    if (pads.size() != 4)
      FailOperator(def,
                   fmt::format("'pads' needs 4 values (t, l, b, r) for 2-D inputs, got {}", pads.size()));
    args.pad_t = pads[0];
    args.pad_l = pads[1];
    args.pad_b = pads[2];
    args.pad_r = pads[3];
  } else {
    args.pad_t = args.pad_l = args.pad_b = args.pad_r = IntArg(def, "pad");
  }
  return args;
}

// Declares the three spellings ReadPair accepts for one (h, w) pair of positive values: `name` for both (with
// `default_value` when given), `name_h` with `name_w`, and the list `plural`.
void DeclarePairArgs(OpSchema& schema, const std::string& name, const std::string& plural,
                     std::optional<int64_t> default_value, const std::string& both, const std::string& h,
                     const std::string& w, const std::string& list) {
  if (default_value)
    schema.Arg(name, ArgType::kInt, *default_value, both);
  else
    schema.Arg(name, ArgType::kInt, both);
  schema.Min(1)
      .Arg(name + "_h", ArgType::kInt, fmt::format("{}, with {}_w", h, name))
      .Min(1)
      .Arg(name + "_w", ArgType::kInt, fmt::format("{}, with {}_h", w, name))
      .Min(1)
      .Arg(plural, ArgType::kInts, list)
      .Min(1);
}

void DeclareWindowArgs(OpSchema& schema) {
  DeclarePairArgs(schema, "kernel", "kernels", std::nullopt, "window height and width", "window height",
                  "window width", "[height, width] of the window");
  DeclarePairArgs(schema, "stride", "strides", 1, "step of the window in both dims", "vertical step",
                  "horizontal step", "[vertical, horizontal] step");
  schema.Arg("pad", ArgType::kInt, 0, "zero padding on all four sides")
      .Min(0)
      .Arg("pad_t", ArgType::kInt, "padding at the top, with pad_l, pad_b and pad_r")
      .Min(0)
      .Arg("pad_l", ArgType::kInt, "padding at the left")
      .Min(0)
      .Arg("pad_b", ArgType::kInt, "padding at the bottom")
      .Min(0)
      .Arg("pad_r", ArgType::kInt, "padding at the right")
      .Min(0)
      .Arg("pads", ArgType::kInts, "[top, left, bottom, right] padding")
      .Min(0)
      .Include(DeclareNchwOrder)
      .Arg("legacy_pad", ArgType::kInt, 0, "Caffe2's legacy padding modes; only 0, explicit pads");
}

}  // namespace

void DeclareConvArgs(OpSchema& schema) {
  DeclareWindowArgs(schema);
  DeclarePairArgs(schema, "dilation", "dilations", 1, "spacing of the filter taps in both dims (1: dense)",
                  "vertical spacing", "horizontal spacing", "[vertical, horizontal] spacing");
  schema
      .Arg("group", ArgType::kInt, 1,
           "channel groups: input and output channels split into group convolutions")
      .Min(1);
}

ConvPoolArgs ParseConvPoolArgs(const OperatorDef& def) {
  ConvPoolArgs args = ParseWindowArgs(def);
  ReadPair(def, "dilation", "dilations", &args.dilation_h, &args.dilation_w);
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

Shape ConvOutputShape(const OperatorDef& def, const ConvPoolArgs& args, int64_t group, const Shape& x,
                      const Shape& filter, const Shape* bias) {
  if (x.size() != 4) FailOperator(def, fmt::format("input must be (N, C, H, W), got {}", ShapeToString(x)));
  if (filter.size() != 4)
    FailOperator(def, fmt::format("filter must be (M, C/group, kh, kw), got {}", ShapeToString(filter)));
  if (group <= 0 || x[1] % group != 0 || filter[0] % group != 0)
    FailOperator(def, fmt::format("group {} must divide the input channels ({}) and the filter count ({})",
                                  group, x[1], filter[0]));
  if (filter[1] * group != x[1])
    FailOperator(def, fmt::format("filter {} has {} channels per group but input {} with group {} needs {}",
                                  ShapeToString(filter), filter[1], ShapeToString(x), group, x[1] / group));
  if (args.has_kernel() && (args.kernel_h != filter[2] || args.kernel_w != filter[3]))
    FailOperator(def, fmt::format("kernel {}x{} does not match filter {}", args.kernel_h, args.kernel_w,
                                  ShapeToString(filter)));
  if (bias && (bias->size() != 1 || (*bias)[0] != filter[0]))
    FailOperator(def, fmt::format("bias must be ({}), got {}", filter[0], ShapeToString(*bias)));
  ConvPoolArgs window = args;
  window.kernel_h = filter[2];
  window.kernel_w = filter[3];
  auto [out_h, out_w] = ConvPoolOutputSize(def, window, x[2], x[3]);
  return {x[0], filter[0], out_h, out_w};
}

void DeclarePoolArgs(OpSchema& schema) {
  DeclareWindowArgs(schema);
  schema
      .Arg("global_pooling", ArgType::kInt, 0, "1: the window is the whole plane (no kernel, stride or pad)")
      .Range(0, 1);
}

ConvPoolArgs ParsePoolArgs(const OperatorDef& def) {
  ConvPoolArgs args = ParseWindowArgs(def);
  args.global_pooling = IntArg(def, "global_pooling") != 0;
  if (args.global_pooling) {
    if (args.has_kernel() || args.stride_h != 1 || args.stride_w != 1 || args.pad_t || args.pad_l ||
        args.pad_b || args.pad_r)
      FailOperator(def, "global_pooling covers the whole plane: drop kernel, stride and pad");
    return args;
  }
  if (!args.has_kernel())
    FailOperator(def, "needs 'kernel' (or kernel_h/kernel_w, kernels) or global_pooling=1");
  // A window that lies wholly in the padding would have nothing to pool.
  if (args.pad_t >= args.kernel_h || args.pad_b >= args.kernel_h || args.pad_l >= args.kernel_w ||
      args.pad_r >= args.kernel_w)
    FailOperator(
        def, fmt::format("pads (t {}, l {}, b {}, r {}) must be smaller than the {}x{} kernel", args.pad_t,
                         args.pad_l, args.pad_b, args.pad_r, args.kernel_h, args.kernel_w));
  return args;
}

ConvPoolArgs PoolWindow(const OperatorDef& def, const ConvPoolArgs& args, const Shape& x) {
  if (x.size() != 4) FailOperator(def, fmt::format("input must be (N, C, H, W), got {}", ShapeToString(x)));
  ConvPoolArgs window = args;
  if (args.global_pooling) {
    window.kernel_h = x[2];
    window.kernel_w = x[3];
  }
  return window;
}

bool PoolWindowsTile(const ConvPoolArgs& args) {
  const bool unpadded = args.pad_t == 0 && args.pad_l == 0 && args.pad_b == 0 && args.pad_r == 0;
  return args.global_pooling ||
         (unpadded && args.kernel_h == args.stride_h && args.kernel_w == args.stride_w);
}

Shape PoolOutputShape(const OperatorDef& def, const ConvPoolArgs& window, const Shape& x) {
  auto [out_h, out_w] = ConvPoolOutputSize(def, window, x[2], x[3]);
  return {x[0], x[1], out_h, out_w};
}

}  // namespace lockstep
