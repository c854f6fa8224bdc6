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

// Executes a primitive on this thread's stream and waits.
void Execute(const dnnl::primitive& primitive, const std::unordered_map<int, dnnl::memory>& args);

// Brings `user` into `desc`'s layout, reusing `scratch` as the buffer when a reorder is needed.
// Returns `user` itself when the layouts already match.
dnnl::memory ReorderIfNeeded(const dnnl::memory& user, const dnnl::memory::desc& desc, dnnl::memory* scratch);

}  // namespace lockstep
