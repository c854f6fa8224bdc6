// The instruction set oneDNN dispatches its CPU kernels to (which ONEDNN_MAX_CPU_ISA may lower), and whether
// it has native bfloat16 arithmetic.
#pragma once

#include <string>

namespace lockstep {

// oneDNN's name for it, lower case: "avx2", "avx512_core", "avx512_core_bf16", "avx512_core_amx", ...
std::string CpuIsaName();

// True with AVX512_BF16 (Cooper Lake, Zen 4 and later) or AMX-BF16 (Sapphire Rapids and later), which
// oneDNN's bfloat16 kernels need to be faster than float32.
bool CpuHasBFloat16Instructions();

// Throws InvalidInput when the CPU lacks them: "<what> needs AVX512_BF16 or AMX instructions, ...".
void RequireCpuBFloat16(const std::string& what);

}  // namespace lockstep
