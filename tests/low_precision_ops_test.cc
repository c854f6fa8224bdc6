// bfloat16 on the CPU: each bfloat16 case of the operator table (op_cases.h: convolution, FC, pooling, ReLU,
// batch normalization, the sums and the data movement between them, and their gradients) runs with its
// narrowed inputs in bfloat16 and is compared with the same operator in float32 on the same values. The
// gradient operators' float32 versions are checked against finite differences in their own tests, so a
// bfloat16 gradient within the bound of its float32 one is checked too.
#include <set>

#include "lockstep/core/cpu_isa.h"
#include "op_cases.h"

namespace lockstep::testing {
namespace {

// oneDNN's bfloat16 kernels need AVX-512: native with AVX512_BF16 or AMX, emulated on plain AVX-512.
bool CpuRunsBFloat16() {
  const std::string isa = CpuIsaName();
  return CpuHasBFloat16Instructions() || isa == "avx512_core" || isa == "avx512_core_vnni";
}

// oneDNN computes in float32 from the bfloat16 values and rounds what it stores to bfloat16, which moves a
// value by up to 2^-9 relative; an operator stores an intermediate (a normalized value, a partial sum) at
// most once more. Two such roundings were the most seen with AMX kernels (4e-3); the bound leaves twice that
// for kernels of other CPUs, which accumulate in other orders.
constexpr float kBFloat16Tolerance = 8e-3f;

std::vector<OpCase> BFloat16Cases() {
  std::vector<OpCase> cases;
  for (OpCase& c : LowPrecisionCases()) {
    if (c.narrow_to != DataType::kBFloat16) continue;
    c.tolerance = kBFloat16Tolerance;
    cases.push_back(std::move(c));
  }
  return cases;
}

class CpuBFloat16OpTable : public ::testing::TestWithParam<OpCase> {};

TEST_P(CpuBFloat16OpTable, MatchesFloat32) {
  if (!CpuRunsBFloat16()) GTEST_SKIP() << "oneDNN runs no bfloat16 kernels on " << CpuIsaName();
  ExpectSameOnCpuAnd(GetParam(), Device{DeviceType::kCpu, 0});
}

INSTANTIATE_TEST_SUITE_P(CpuBFloat16, CpuBFloat16OpTable, ::testing::ValuesIn(BFloat16Cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; });

// The operators a bfloat16 pass runs all have cases here.
TEST(CpuBFloat16, CasesCoverTheMixedPrecisionOperators) {
  std::set<std::string> types;
  for (const auto& c : BFloat16Cases()) types.insert(c.op.type());
  for (const char* type : {"Conv", "ConvGradient", "FC", "FCGradient", "Relu", "ReluGradient", "MaxPool",
                           "MaxPoolGradient", "AveragePool", "AveragePoolGradient", "SpatialBN",
                           "SpatialBNGradient", "Add", "Sum", "Concat", "Flatten"})
    EXPECT_TRUE(types.count(type)) << type << " has no bfloat16 case";
}

}  // namespace
}  // namespace lockstep::testing
