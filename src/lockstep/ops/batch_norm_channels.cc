// Shape checks and channel views of batch-normalization activations.
#include "lockstep/ops/batch_norm_channels.h"

#include "lockstep/core/net_def.h"
#include "lockstep/ops/dnnl_utils.h"

namespace lockstep {

int64_t ChannelCount(const OperatorDef& def, const Shape& x,
                     const std::vector<std::pair<int, const Shape*>>& per_channel) {
  if (x.size() < 2 || x.size() > 5)
    FailOperator(def, fmt::format("X must be (N, C) or (N, C, H, W), got {}", ShapeToString(x)));
  int64_t channels = x[1];
  for (const auto& [input, shape] : per_channel)
    if (*shape != Shape{channels})
      FailOperator(def, fmt::format("input '{}' must be ({}) to match the channels of X {}, got {}",
                                    def.input(input), channels, ShapeToString(x), ShapeToString(*shape)));
  return channels;
}

namespace {

// The view of a layout, or nullopt when it has another form: channels blocked twice or wider than
// kMaxBlock, other dims blocked or padded, spatial dims that are not one dense run.
std::optional<ChannelView> ViewChannels(const dnnl::memory::desc& desc) {
  const dnnl_memory_desc_t& d = desc.data;
  if (d.format_kind != dnnl_blocked || d.ndims < 2 || d.offset0 != 0) return std::nullopt;
  const dnnl_blocking_desc_t& blocking = d.format_desc.blocking;
  ChannelView view;
  if (blocking.inner_nblks == 1 && blocking.inner_idxs[0] == 1 &&
      blocking.inner_blks[0] <= ChannelView::kMaxBlock) {
    view.block = blocking.inner_blks[0];
  } else if (blocking.inner_nblks != 0) {
    return std::nullopt;
  }
  view.batch = d.dims[0];
  view.channels = d.dims[1];
  view.batch_stride = blocking.strides[0];
  view.block_stride = blocking.strides[1];
  if (d.padded_dims[0] != d.dims[0]) return std::nullopt;
  // Spatial dims of size 1 may carry any stride; the others must nest densely, innermost last.
  int64_t next_stride = 0;
  for (int i = d.ndims - 1; i >= 2; --i) {
    if (d.padded_dims[i] != d.dims[i]) return std::nullopt;
    if (d.dims[i] == 1) continue;
    if (next_stride == 0) {
      view.spatial_stride = blocking.strides[i];
    } else if (blocking.strides[i] != next_stride) {
      return std::nullopt;
    }
    next_stride = blocking.strides[i] * d.dims[i];
    view.spatial *= d.dims[i];
  }
  return view;
}

}  // namespace

const Tensor& ChannelAddressable(const Tensor& tensor, Tensor* plain, ChannelView* view) {
  if (auto found = ViewChannels(DescOf(tensor))) {
    *view = *found;
    return tensor;
  }
  tensor.ToPlain(plain);
  *view = *ViewChannels(DescOf(*plain));
  return *plain;
}

}  // namespace lockstep
