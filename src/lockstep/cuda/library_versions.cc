// The versions of the CUDA libraries lockstep runs on, for `lockstep --version`.
#include <fmt/format.h>

#include <string>

#include "lockstep/cuda/cuda_check.h"

namespace lockstep {

// "CUDA runtime 12.8 (driver 12.9)\ncuDNN 9.10.1\nNCCL 2.26.5": the libraries loaded, which may be newer than
// the headers lockstep was compiled with. The driver's is "none" on a machine without one.
std::string CudaLibraryVersions() {
  int runtime = 0, driver = 0, nccl = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  ncclGetVersion(&nccl);
  const size_t cudnn = cudnnGetVersion();
  const std::string driver_text =
      driver > 0 ? fmt::format("{}.{}", driver / 1000, driver % 1000 / 10) : std::string("none");
  // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch; cuDNN >= 9 major * 10000 + minor * 100 + patch.
  return fmt::format("CUDA runtime {}.{} (driver {})\ncuDNN {}.{}.{}\nNCCL {}.{}.{}", runtime / 1000,
                     runtime % 1000 / 10, driver_text, cudnn / 10000, cudnn % 10000 / 100, cudnn % 100,
                     nccl / 10000, nccl % 10000 / 100, nccl % 100);
}

}  // namespace lockstep
