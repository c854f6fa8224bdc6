// oneDNN engine, per-thread streams and tensor wrapping.
#include "lockstep/ops/dnnl_utils.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include "lockstep/core/enforce.h"

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

dnnl::memory::data_type DnnlType(DataType type) {
  switch (type) {
    case DataType::kFloat:
      return dnnl::memory::data_type::f32;
    case DataType::kBFloat16:
      return dnnl::memory::data_type::bf16;
    default:
      throw InvalidInput(
          fmt::format("CPU operators compute in float32 or bfloat16, not {}", DataTypeName(type)));
  }
}

DataType DataTypeOf(dnnl::memory::data_type type) {
  switch (type) {
    case dnnl::memory::data_type::f32:
      return DataType::kFloat;
    case dnnl::memory::data_type::bf16:
      return DataType::kBFloat16;
    default:
      LOCKSTEP_ENFORCE(false, "no lockstep dtype for oneDNN data type {}", static_cast<int>(type));
      return DataType::kUndefined;
  }
}

bool Signature::Matches(std::initializer_list<const Tensor*> tensors) const {
  auto same = [](const std::pair<Shape, DataType>& entry, const Tensor* tensor) {
    return tensor ? entry.first == tensor->shape() && entry.second == tensor->dtype()
                  : entry.second == DataType::kUndefined;
  };
  return entries_.size() == tensors.size() &&
         std::equal(entries_.begin(), entries_.end(), tensors.begin(), same);
}

void Signature::Record(std::initializer_list<const Tensor*> tensors) {
  entries_.clear();
  for (const Tensor* tensor : tensors)
    entries_.emplace_back(tensor ? tensor->shape() : Shape{},
                          tensor ? tensor->dtype() : DataType::kUndefined);
}

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

dnnl::memory::desc PlainDesc(const Shape& shape, DataType type) {
  return dnnl::memory::desc(ToDims(shape), DnnlType(type), PlainTag(static_cast<int>(shape.size())));
}

dnnl::memory ToMemory(const Tensor& tensor) {
  return ToMemory(tensor, PlainDesc(tensor.shape(), tensor.dtype()));
}

dnnl::memory ToMemory(const Tensor& tensor, const dnnl::memory::desc& desc) {
  return dnnl::memory(desc, CpuEngine(), const_cast<void*>(tensor.raw_data()));
}

void Execute(const dnnl::primitive& primitive, const std::unordered_map<int, dnnl::memory>& args) {
  primitive.execute(ThreadStream(), args);
  ThreadStream().wait();
}

dnnl::memory::desc DescOf(const Tensor& tensor) {
  return tensor.is_plain() ? PlainDesc(tensor.shape(), tensor.dtype()) : tensor.layout()->desc;
}

dnnl::memory AsMemory(const Tensor& tensor) { return ToMemory(tensor, DescOf(tensor)); }

dnnl::memory ResizeForDesc(Tensor* tensor, const Shape& shape, const dnnl::memory::desc& desc) {
  const DataType type = DataTypeOf(desc.get_data_type());
  if (desc == PlainDesc(shape, type)) {
    tensor->Resize(shape, type);
  } else if (tensor->is_plain() || tensor->layout()->desc != desc || tensor->shape() != shape) {
    tensor->ResizeWithLayout(shape, type, std::make_shared<TensorLayout>(TensorLayout{desc}),
                             desc.get_size());
  }
  return dnnl::memory(desc, CpuEngine(), tensor->raw_data());
}

dnnl::memory::desc AnyLayout(const dnnl::memory::desc& desc) {
  return dnnl::memory::desc(desc.get_dims(), desc.get_data_type(), dnnl::memory::format_tag::any);
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

dnnl::primitive_attr ReluPostOp(bool relu) {
  dnnl::primitive_attr attr;
  if (relu) {
    dnnl::post_ops post;
    post.append_eltwise(dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(post);
  }
  return attr;
}

int BlockedLayoutChannels() {
  // oneDNN's ISA values are bit sets, each holding the ones it extends.
  const auto avx512 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & avx512) == avx512 ? 16 : 8;
}

namespace {
std::atomic<size_t> scratch_pool_bytes{0};

// One slot of a thread's scratch pool.
class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ScratchBuffer(ScratchBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer() { Release(); }

  // At least `bytes`, grown to that when smaller.
  void* Reserve(size_t bytes) {
    bytes = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    if (bytes <= bytes_) return data_;
    Release();  // the old buffer goes back before the new one is taken
    data_ = std::aligned_alloc(64, bytes);
    LOCKSTEP_ENFORCE(data_ != nullptr, "out of memory allocating {} bytes of operator scratch", bytes);
    bytes_ = bytes;
    scratch_pool_bytes += bytes;
    return data_;
  }

 private:
  void Release() {
    std::free(data_);
    scratch_pool_bytes -= bytes_;
    data_ = nullptr;
    bytes_ = 0;
  }

  void* data_ = nullptr;
  size_t bytes_ = 0;
};
}  // namespace

dnnl::memory ScratchMemory(const dnnl::memory::desc& desc, int slot) {
  thread_local std::vector<ScratchBuffer> pool;
  if (pool.size() <= static_cast<size_t>(slot)) pool.resize(slot + 1);
  return dnnl::memory(desc, CpuEngine(), pool[slot].Reserve(desc.get_size()));
}

size_t ScratchPoolBytes() { return scratch_pool_bytes; }

dnnl::memory ReorderIfNeeded(const dnnl::memory& user, const dnnl::memory::desc& desc, int slot) {
  if (user.get_desc() == desc) return user;
  dnnl::memory scratch = ScratchMemory(desc, slot);
  ReorderInto(user, scratch);
  return scratch;
}

void ReorderInto(const dnnl::memory& from, const dnnl::memory& to) {
  Execute(dnnl::reorder(from, to), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
}

void LoadKernelGenerators(DataType type) {
  // Creating a primitive generates its kernel, which touches the generator's code; the primitives go when
  // this returns, the code stays mapped.
  using namespace dnnl;
  const memory::data_type dt = DnnlType(type);
  const memory::dims x{2, 16, 8, 8}, w{16, 16, 3, 3}, one{1, 1};
  auto any = [&](const memory::dims& dims) { return memory::desc(dims, dt, memory::format_tag::any); };
  engine& cpu = CpuEngine();
  convolution_forward::primitive_desc forward(cpu, prop_kind::forward_training, algorithm::convolution_direct,
                                              any(x), any(w), any(x), one, one, one);
  convolution_backward_data::primitive_desc data(cpu, algorithm::convolution_direct, any(x), any(w), any(x),
                                                 one, one, one, forward);
  convolution_backward_weights::primitive_desc weights(cpu, algorithm::convolution_direct, any(x), any(w),
                                                       any(x), one, one, one, forward);
  convolution_forward c1(forward);
  convolution_backward_data c2(data);
  convolution_backward_weights c3(weights);
  const memory::desc blocked = forward.src_desc();
  pooling_forward::primitive_desc pool(cpu, prop_kind::forward_training, algorithm::pooling_max, blocked,
                                       any({2, 16, 4, 4}), {2, 2}, {2, 2}, {0, 0}, {0, 0}, {0, 0});
  pooling_forward p1(pool);
  pooling_backward p2(pooling_backward::primitive_desc(cpu, algorithm::pooling_max, blocked, pool.dst_desc(),
                                                       {2, 2}, {2, 2}, {0, 0}, {0, 0}, {0, 0}, pool));
  eltwise_forward::primitive_desc relu(cpu, prop_kind::forward_training, algorithm::eltwise_relu, blocked,
                                       blocked, 0.f);
  eltwise_forward e1(relu);
  eltwise_backward e2(
      eltwise_backward::primitive_desc(cpu, algorithm::eltwise_relu, blocked, blocked, blocked, 0.f, relu));
  inner_product_forward i1(inner_product_forward::primitive_desc(
      cpu, prop_kind::forward_training, memory::desc({16, 64}, dt, memory::format_tag::ab),
      memory::desc({16, 64}, dt, memory::format_tag::ab),
      memory::desc({16, 16}, dt, memory::format_tag::ab)));
}

}  // namespace lockstep
