// What the cuDNN operators share: owned cuDNN descriptors, the cuDNN type of a tensor's dtype and descriptors
// of plain NCHW tensors. (Hand-written kernels share ops/cuda/cuda_kernels.cuh.)
#pragma once

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

// cuDNN's type for tensors of `type`. Throws InvalidInput naming the operator and `what` (the tensor's role)
// for a type other than float32, float16 or bfloat16.
cudnnDataType_t CudnnDataType(const OperatorDef& def, const char* what, DataType type);

// Describes a plain, packed (N, C, spatial...) tensor of 2 to 5 dims; shorter shapes get trailing 1s, since
// cuDNN wants at least 4. Throws InvalidInput naming the operator when the tensor has more elements than
// cuDNN's int strides can index.
void SetTensorDescriptor(const OperatorDef& def, cudnnTensorDescriptor_t desc, DataType type,
                         const Shape& shape);

}  // namespace lockstep::cuda
