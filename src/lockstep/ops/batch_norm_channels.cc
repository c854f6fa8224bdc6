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
  if (desc.get_format_kind() != dnnl::memory::format_kind::blocked || desc.get_ndims() < 2 ||
      desc.get_submemory_offset() != 0)
    return std::nullopt;
  const dnnl::memory::dims dims = desc.get_dims(), padded = desc.get_padded_dims(),
                           strides = desc.get_strides();
  const int inner_blocks = desc.get_inner_nblks();
  ChannelView view;
  if (inner_blocks == 1 && desc.get_inner_idxs()[0] == 1 && desc.get_inner_blks()[0] <= ChannelView::kMaxBlock) {
    view.block = desc.get_inner_blks()[0];
  } else if (inner_blocks != 0) {
    return std::nullopt;
  }
  view.batch = dims[0];
  view.channels = dims[1];
  view.batch_stride = strides[0];
  view.block_stride = strides[1];
  if (padded[0] != dims[0]) return std::nullopt;
  // Spatial dims of size 1 may carry any stride; the others must nest densely, innermost last.
  int64_t next_stride = 0;
  for (int i = static_cast<int>(dims.size()) - 1; i >= 2; --i) {
    if (padded[i] != dims[i]) return std::nullopt;
    if (dims[i] == 1) continue;
    if (next_stride == 0) {
      view.spatial_stride = strides[i];
    } else if (strides[i] != next_stride) {
      return std::nullopt;
    }
    next_stride = strides[i] * dims[i];
    view.spatial *= dims[i];
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
