// Glue between lockstep tensors and oneDNN: the CPU engine, a stream per thread, and memory objects that
// wrap tensor buffers without copying.
#pragma once

#include <initializer_list>
#include <oneapi/dnnl/dnnl.hpp>
#include <utility>
#include <vector>

#include "lockstep/core/tensor.h"

namespace lockstep {

dnnl::engine& CpuEngine();
dnnl::stream& ThreadStream();  // one per thread: replicas run concurrently

dnnl::memory::dims ToDims(const Shape& shape);
// oneDNN's name for a dtype the CPU operators compute in (float32 or bfloat16), and back.
dnnl::memory::data_type DnnlType(DataType type);
DataType DataTypeOf(dnnl::memory::data_type type);
// The shapes and dtypes of the tensors an operator built its primitives for (absent ones as nullptr); layouts
// need no rebuild, reorders take care of them. Matches runs every step and allocates nothing.
class Signature {
 public:
  bool Matches(std::initializer_list<const Tensor*> tensors) const;
  void Record(std::initializer_list<const Tensor*> tensors);

 private:
  std::vector<std::pair<Shape, DataType>> entries_;
};
// Plain row-major layout of the given rank (a, ab, abc, abcd, abcde).
dnnl::memory::format_tag PlainTag(int rank);
dnnl::memory::desc PlainDesc(const Shape& shape, DataType type = DataType::kFloat);
// Wraps the tensor's buffer (plain layout, its dtype).
dnnl::memory ToMemory(const Tensor& tensor);
dnnl::memory ToMemory(const Tensor& tensor, const dnnl::memory::desc& desc);

// A tensor's backend layout is a oneDNN memory descriptor (blocked formats such as nChw16c). Layout-aware
// operators read inputs in whatever layout they come and leave outputs in the layout their primitive prefers,
// so chains of oneDNN operators never convert; other operators see plain copies (Operator::Input).
struct TensorLayout {
  dnnl::memory::desc desc;
};

// The tensor's descriptor: its backend layout, or plain row-major in its dtype.
dnnl::memory::desc DescOf(const Tensor& tensor);
// The tensor's buffer in its own layout.
dnnl::memory AsMemory(const Tensor& tensor);
// Sizes `tensor` to hold `shape` in `desc`'s layout and dtype (plain when desc is plain) and returns memory
// over it.
dnnl::memory ResizeForDesc(Tensor* tensor, const Shape& shape, const dnnl::memory::desc& desc);
// `desc` (its dims and dtype) with its layout left for the primitive to choose.
dnnl::memory::desc AnyLayout(const dnnl::memory::desc& desc);

// A primitive's attributes: none, or with `relu` the post-op dst = max(dst, 0) (a ReLU fused into the op).
dnnl::primitive_attr ReluPostOp(bool relu);

// Channels per block of oneDNN's blocked activation layouts on this CPU (16 with AVX-512, else 8): those
// layouts round a 4-D activation's channels up to a multiple of it.
int BlockedLayoutChannels();

// Executes a primitive on this thread's stream and waits.
void Execute(const dnnl::primitive& primitive, const std::unordered_map<int, dnnl::memory>& args);

// Memory for what an operator needs only while it runs (an input reordered into its primitive's layout, an
// output nobody asked for, a workspace): slot `slot` of this thread's pool, one buffer that grows to the
// largest request and serves every operator the thread runs, so that those copies take the memory of the
// largest instead of their sum. Valid until the thread asks for the same slot again.
dnnl::memory ScratchMemory(const dnnl::memory::desc& desc, int slot);
// The bytes all threads' scratch pools hold now (a pool goes with its thread).
size_t ScratchPoolBytes();

// Brings `user` into `desc`'s layout in scratch slot `slot`; returns `user` itself when the layouts match.
dnnl::memory ReorderIfNeeded(const dnnl::memory& user, const dnnl::memory::desc& desc, int slot);
// Copies `from` into `to`, another layout of the same tensor.
void ReorderInto(const dnnl::memory& from, const dnnl::memory& to);

// Creates a small convolution (forward and both backward passes), pooling, ReLU and inner product in `type`,
// so that oneDNN's kernel generators for this CPU are in memory: every training run loads them at its first
// step, and the memory plan's baseline, measured before it, should hold them.
void LoadKernelGenerators(DataType type);

}  // namespace lockstep
