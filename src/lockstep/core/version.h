// lockstep's version and what it was built from: the one source of the version string that `lockstep
// --version`, the trainer's output, checkpoints and the shards' fingerprint carry (CMake's project version).
#pragma once

#include <string>

namespace lockstep {

const char* Version();    // "0.1.0"
const char* GitCommit();  // the source tree's commit, "-dirty" with uncommitted changes, or "unknown"
// "lockstep 0.1.0 (git 0123456789ab)"
std::string VersionLine();
// VersionLine, then one line per library lockstep runs on: oneDNN (with the CPU instruction set its kernels
// use), and CUDA, cuDNN and NCCL when built in.
std::string BuildDescription();

}  // namespace lockstep
