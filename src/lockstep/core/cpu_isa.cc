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
    case dnnl_cpu_isa_avx2_vnni_2:
      return "avx2_vnni_2";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_fp16:
      return "avx512_core_fp16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
    case dnnl_cpu_isa_avx512_core_amx_fp16:
      return "avx512_core_amx_fp16";
    default:
      return "unknown";
  }
}

bool CpuHasBFloat16Instructions() {
  // oneDNN's ISA values are bit sets, each holding the ones it extends (AMX and AVX512_FP16 hold AVX512_BF16).
  const unsigned bf16 = dnnl_cpu_isa_avx512_core_bf16;
  return (static_cast<unsigned>(dnnl_get_effective_cpu_isa()) & bf16) == bf16;
}

void RequireCpuBFloat16(const std::string& what) {
  if (!CpuHasBFloat16Instructions())
    throw InvalidInput(fmt::format(
        "{} needs AVX512_BF16 or AMX instructions, and oneDNN uses {} here; compute in float instead", what,
        CpuIsaName()));
}

}  // namespace lockstep
