// oneDNN engine, per-thread streams and tensor wrapping.
#include "lockstep/ops/dnnl_utils.h"

namespace lockstep {

dnnl::engine& CpuEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& ThreadStream() {
  thread_local dnnl::stream stream(CpuEngine());
  return stream;
}

dnnl::memory::dims ToDims(const Shape& shape) { return dnnl::memory::dims(shape.begin(), shape.end()); }

dnnl::memory::format_tag PlainTag(int rank) {
  using tag = dnnl::memory::format_tag;
  switch (rank) {
    case 1:
      return tag::a;
    case 2:
      return tag::ab;
    case 3:
      return tag::abc;
    case 4:
      return tag::abcd;
    case 5:
      return tag::abcde;
  }
  LOCKSTEP_ENFORCE(false, "oneDNN tensors have rank 1 to 5, got {}", rank);
  return tag::undef;
}

dnnl::memory::desc PlainDesc(const Shape& shape) {
  return dnnl::memory::desc(ToDims(shape), dnnl::memory::data_type::f32,
                            PlainTag(static_cast<int>(shape.size())));
}

dnnl::memory ToMemory(const Tensor& tensor) { return ToMemory(tensor, PlainDesc(tensor.shape())); }

dnnl::memory ToMemory(const Tensor& tensor, const dnnl::memory::desc& desc) {
  return dnnl::memory(desc, CpuEngine(), const_cast<void*>(tensor.raw_data()));
}

void Execute(const dnnl::primitive& primitive, const std::unordered_map<int, dnnl::memory>& args) {
  primitive.execute(ThreadStream(), args);
  ThreadStream().wait();
}

dnnl::memory::desc DescOf(const Tensor& tensor) {
  return tensor.is_plain() ? PlainDesc(tensor.shape()) : tensor.layout()->desc;
}

dnnl::memory AsMemory(const Tensor& tensor) { return ToMemory(tensor, DescOf(tensor)); }

dnnl::memory ResizeForDesc(Tensor* tensor, const Shape& shape, const dnnl::memory::desc& desc) {
  if (desc == PlainDesc(shape)) {
    tensor->Resize(shape);
  } else if (tensor->is_plain() || tensor->layout()->desc != desc || tensor->shape() != shape) {
    tensor->ResizeWithLayout(shape, DataType::kFloat, std::make_shared<TensorLayout>(TensorLayout{desc}),
                             desc.get_size());
  }
  return dnnl::memory(desc, CpuEngine(), tensor->raw_data());
}

dnnl::memory::desc AnyLayout(const dnnl::memory::desc& desc) {
  return dnnl::memory::desc(desc.dims(), dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
}

namespace {
void ReorderToPlain(const Tensor& from, Tensor* plain) {
  plain->Resize(from.shape(), from.dtype());
  if (from.numel() == 0) return;
  dnnl::memory source = AsMemory(from);
  dnnl::memory target = ToMemory(*plain);
  Execute(dnnl::reorder(source, target), {{DNNL_ARG_FROM, source}, {DNNL_ARG_TO, target}});
}
const bool registered = (RegisterLayoutConverter(ReorderToPlain), true);
}  // namespace

dnnl::memory ReorderIfNeeded(const dnnl::memory& user, const dnnl::memory::desc& desc,
                             dnnl::memory* scratch) {
  if (user.get_desc() == desc) return user;
  if (!*scratch || scratch->get_desc() != desc) *scratch = dnnl::memory(desc, CpuEngine());
  Execute(dnnl::reorder(user, *scratch), {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, *scratch}});
  return *scratch;
}

}  // namespace lockstep
