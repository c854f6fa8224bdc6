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

[[noreturn]] void ThrowCudaError(const char* library, const char* call, const std::string& message,
                                 const char* file, int line);
// The runtime's message, with what to do when the build has no code for this GPU.
std::string CudaMessage(cudaError_t status);
const char* CublasMessage(cublasStatus_t status);
const char* CurandMessage(curandStatus_t status);

}  // namespace lockstep::cuda

// `call` (spelled `text`) must return the library's `success` status; `message` turns any other status into
// the library's text.
#define LOCKSTEP_LIBRARY_CHECK_(library, text, call, success, message)                                \
  do {                                                                                                \
    const auto lockstep_status_ = (call);                                                             \
    if (lockstep_status_ != (success))                                                                \
      ::lockstep::cuda::ThrowCudaError(library, text, message(lockstep_status_), __FILE__, __LINE__); \
  } while (0)
#define LOCKSTEP_CUDA_CHECK(call) \
  LOCKSTEP_LIBRARY_CHECK_("CUDA", #call, call, cudaSuccess, ::lockstep::cuda::CudaMessage)
#define LOCKSTEP_CUBLAS_CHECK(call) \
  LOCKSTEP_LIBRARY_CHECK_("cuBLAS", #call, call, CUBLAS_STATUS_SUCCESS, ::lockstep::cuda::CublasMessage)
#define LOCKSTEP_CUDNN_CHECK(call) \
  LOCKSTEP_LIBRARY_CHECK_("cuDNN", #call, call, CUDNN_STATUS_SUCCESS, cudnnGetErrorString)
#define LOCKSTEP_CURAND_CHECK(call) \
  LOCKSTEP_LIBRARY_CHECK_("cuRAND", #call, call, CURAND_STATUS_SUCCESS, ::lockstep::cuda::CurandMessage)
#define LOCKSTEP_NCCL_CHECK(call) \
  LOCKSTEP_LIBRARY_CHECK_("NCCL", #call, call, ncclSuccess, ncclGetErrorString)
// After a kernel launch: a bad configuration shows up here, not at the next unrelated call.
#define LOCKSTEP_CUDA_CHECK_LAUNCH() LOCKSTEP_CUDA_CHECK(cudaGetLastError())
