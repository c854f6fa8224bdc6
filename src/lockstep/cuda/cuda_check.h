// Checked calls into the CUDA runtime, cuBLAS, cuDNN, cuRAND and NCCL: a failure throws lockstep::Error with
// the call, the library's message and where it happened.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <curand.h>
#include <nccl.h>

#include <string>

#include "lockstep/core/enforce.h"

namespace lockstep::cuda {

[[noreturn]] void ThrowCudaError(const char* library, const char* call, const char* message, const char* file,
                                 int line);
// The runtime's message, with what to do when the build has no code for this GPU.
std::string CudaMessage(cudaError_t status);
const char* CublasMessage(cublasStatus_t status);
const char* CurandMessage(curandStatus_t status);

}  // namespace lockstep::cuda

#define LOCKSTEP_CUDA_CHECK(call)                                                                      \
  do {                                                                                                 \
    cudaError_t lockstep_status_ = (call);                                                             \
    if (lockstep_status_ != cudaSuccess)                                                               \
      ::lockstep::cuda::ThrowCudaError(                                                                \
          "CUDA", #call, ::lockstep::cuda::CudaMessage(lockstep_status_).c_str(), __FILE__, __LINE__); \
  } while (0)
#define LOCKSTEP_CUBLAS_CHECK(call)                                                                        \
  do {                                                                                                     \
    cublasStatus_t lockstep_status_ = (call);                                                              \
    if (lockstep_status_ != CUBLAS_STATUS_SUCCESS)                                                         \
      ::lockstep::cuda::ThrowCudaError("cuBLAS", #call, ::lockstep::cuda::CublasMessage(lockstep_status_), \
                                       __FILE__, __LINE__);                                                \
  } while (0)
#define LOCKSTEP_CUDNN_CHECK(call)                                                                      \
  do {                                                                                                  \
    cudnnStatus_t lockstep_status_ = (call);                                                            \
    if (lockstep_status_ != CUDNN_STATUS_SUCCESS)                                                       \
      ::lockstep::cuda::ThrowCudaError("cuDNN", #call, cudnnGetErrorString(lockstep_status_), __FILE__, \
                                       __LINE__);                                                       \
  } while (0)
#define LOCKSTEP_CURAND_CHECK(call)                                                                        \
  do {                                                                                                     \
    curandStatus_t lockstep_status_ = (call);                                                              \
    if (lockstep_status_ != CURAND_STATUS_SUCCESS)                                                         \
      ::lockstep::cuda::ThrowCudaError("cuRAND", #call, ::lockstep::cuda::CurandMessage(lockstep_status_), \
                                       __FILE__, __LINE__);                                                \
  } while (0)
#define LOCKSTEP_NCCL_CHECK(call)                                                                     \
  do {                                                                                                \
    ncclResult_t lockstep_status_ = (call);                                                           \
    if (lockstep_status_ != ncclSuccess)                                                              \
      ::lockstep::cuda::ThrowCudaError("NCCL", #call, ncclGetErrorString(lockstep_status_), __FILE__, \
                                       __LINE__);                                                     \
  } while (0)
// After a kernel launch: a bad configuration shows up here, not at the next unrelated call.
#define LOCKSTEP_CUDA_CHECK_LAUNCH() LOCKSTEP_CUDA_CHECK(cudaGetLastError())
