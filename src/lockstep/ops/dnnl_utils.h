// Glue between lockstep tensors and oneDNN: the CPU engine, a stream per thread, and memory objects that
// wrap tensor buffers without copying.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "lockstep/core/tensor.h"

namespace lockstep {

dnnl::engine& CpuEngine();
dnnl::stream& ThreadStream();  // one per thread: replicas run concurrently

dnnl::memory::dims ToDims(const Shape& shape);
// Plain row-major layout of the given rank (a, ab, abc, abcd, abcde).
dnnl::memory::format_tag PlainTag(int rank);
dnnl::memory::desc PlainDesc(const Shape& shape);
// Wraps the tensor's buffer (float32, plain layout).
dnnl::memory ToMemory(const Tensor& tensor);
dnnl::memory ToMemory(const Tensor& tensor, const dnnl::memory::desc& desc);

// A tensor's backend layout is a oneDNN memory descriptor (blocked formats such as nChw16c). Layout-aware
// operators read inputs in whatever layout they come and leave outputs in the layout their primitive prefers,
// so chains of oneDNN operators never convert; other operators see plain copies (Operator::Input).
struct TensorLayout {
  dnnl::memory::desc desc;
};

// The tensor's descriptor: its backend layout, or plain row-major float32.
dnnl::memory::desc DescOf(const Tensor& tensor);
// The tensor's buffer in its own layout.
dnnl::memory AsMemory(const Tensor& tensor);
// Sizes `tensor` to hold `shape` in `desc`'s layout (plain when desc is plain) and returns memory over it.
dnnl::memory ResizeForDesc(Tensor* tensor, const Shape& shape, const dnnl::memory::desc& desc);
// `desc` with its layout left for the primitive to choose.
dnnl::memory::desc AnyLayout(const dnnl::memory::desc& desc);

// Executes a primitive on this thread's stream and waits.
void Execute(const dnnl::primitive& primitive, const std::unordered_map<int, dnnl::memory>& args);

// Brings `user` into `desc`'s layout, reusing `scratch` as the buffer when a reorder is needed.
// Returns `user` itself when the layouts already match.
dnnl::memory ReorderIfNeeded(const dnnl::memory& user, const dnnl::memory::desc& desc, dnnl::memory* scratch);

}  // namespace lockstep
