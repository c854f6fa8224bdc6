// The CPU instruction set oneDNN uses.
#include "lockstep/core/cpu_isa.h"

#include <fmt/format.h>

#include "lockstep/core/enforce.h"
#include "oneapi/dnnl/dnnl.h"

namespace lockstep {

std::string CpuIsaName() {
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41:
      return "sse41";
    case dnnl_cpu_isa_avx:
      return "avx";
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
      return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic:
      return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "unknown";
  }
}

bool CpuHasBFloat16Instructions() {
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  return isa == dnnl_cpu_isa_avx512_core_bf16 || isa == dnnl_cpu_isa_avx512_core_amx;
}

void RequireCpuBFloat16(const std::string& what) {
  if (!CpuHasBFloat16Instructions())
    throw InvalidInput(fmt::format(
        "{} needs AVX512_BF16 or AMX instructions, and oneDNN uses {} here; compute in float instead", what,
        CpuIsaName()));
}

}  // namespace lockstep
