// Version and build description.
#include "lockstep/core/version.h"

#include <fmt/format.h>

#include <string>

#include "lockstep/core/cpu_isa.h"
#include "lockstep_git_commit.h"  // written at build time by cmake/git_commit.cmake
#include "oneapi/dnnl/dnnl.h"

namespace lockstep {

#ifdef LOCKSTEP_WITH_CUDA
std::string CudaLibraryVersions();  // src/lockstep/cuda/library_versions.cc
#endif

const char* Version() { return LOCKSTEP_VERSION; }

const char* GitCommit() { return LOCKSTEP_GIT_COMMIT; }

std::string VersionLine() { return fmt::format("lockstep {} (git {})", Version(), GitCommit()); }

std::string BuildDescription() {
  const dnnl_version_t* dnnl = dnnl_version();
  std::string text = fmt::format("{}\noneDNN {}.{}.{}", VersionLine(), dnnl->major, dnnl->minor, dnnl->patch);
  if (std::string(dnnl->hash) != "N/A")
    text += fmt::format(" (git {})", dnnl->hash);  // distributions give none
  text += fmt::format(", CPU kernels for {}", CpuIsaName());
#ifdef LOCKSTEP_WITH_CUDA
  text += "\n" + CudaLibraryVersions();
#endif
  return text;
}

}  // namespace lockstep
