// What the cuDNN operators share: owned cuDNN descriptors, the cuDNN type of a tensor's dtype, descriptors of
// plain NCHW tensors, and the dtype dispatch and launch shape of the small kernels next to them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <utility>

#include "lockstep.pb.h"
#include "lockstep/core/net_def.h"
#include "lockstep/core/tensor.h"
#include "lockstep/cuda/cuda_check.h"

namespace lockstep::cuda {

// cuDNN's alpha and beta (result = alpha * op(...) + beta * result) are floats for float, float16 and
// bfloat16 data.
inline constexpr float kOne = 1.0f;
inline constexpr float kZero = 0.0f;

// Owns one cuDNN descriptor, created and destroyed with the object.
template <typename Handle, cudnnStatus_t (*kCreate)(Handle*), cudnnStatus_t (*kDestroy)(Handle)>
class CudnnDescriptor {
 public:
  CudnnDescriptor() { LOCKSTEP_CUDNN_CHECK(kCreate(&handle_)); }
  ~CudnnDescriptor() { kDestroy(handle_); }
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;

  Handle get() const { return handle_; }

 private:
  Handle handle_ = nullptr;
};

using TensorDescriptor =
    CudnnDescriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDescriptor =
    CudnnDescriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;

// Whether the CUDA operators compute on tensors of `type`: float32, float16 and bfloat16.
bool IsFloatingType(DataType type);

// cuDNN's type for tensors of `type`. Throws InvalidInput naming the operator and `what` (the tensor's role)
// for a type other than float32, float16 or bfloat16.
cudnnDataType_t CudnnDataType(const OperatorDef& def, const char* what, DataType type);

// Describes a plain, packed (N, C, spatial...) tensor of 2 to 5 dims; shorter shapes get trailing 1s, since
// cuDNN wants at least 4. Throws InvalidInput naming the operator when the tensor has more elements than
// cuDNN's int strides can index.
void SetTensorDescriptor(const OperatorDef& def, cudnnTensorDescriptor_t desc, DataType type,
                         const Shape& shape);

// Same, for a (1, C, 1, 1) tensor: a per-channel bias.
void SetChannelDescriptor(const OperatorDef& def, cudnnTensorDescriptor_t desc, DataType type,
                          int64_t channels);

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<T>()) with T the kernel element type of floating `type`: float, __half or __nv_bfloat16.
// Throws InvalidInput naming the operator and `what` for other types.
template <typename F>
void DispatchFloating(const OperatorDef& def, const char* what, DataType type, F&& f) {
  switch (type) {
    case DataType::kFloat:
      return f(TypeTag<float>());
    case DataType::kFloat16:
      return f(TypeTag<__half>());
    case DataType::kBFloat16:
      return f(TypeTag<__nv_bfloat16>());
    default:
      CudnnDataType(def, what, type);  // throws the error for a type that is not floating
  }
}

// The small kernels use 256 threads per block and grid-stride loops over a capped number of blocks.
inline constexpr int kThreadsPerBlock = 256;
inline unsigned BlocksFor(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreadsPerBlock - 1) / kThreadsPerBlock, 1, 65535));
}

}  // namespace lockstep::cuda
