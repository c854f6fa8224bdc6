// Every operator on a CUDA device against the CPU (the table in tests/op_cases.cc), the registered gradients
// of the trainable operators against finite differences on the device, and two checks that keep the table
// and the CUDA registrations complete as operators are added. The comparisons skip without a GPU.
//
// LOCKSTEP_TABLE_CPU_ONLY=1 runs every case on the CPU twice, the second run in the device's place, and the
// gradient checks on the CPU, on any machine: it catches mistakes in the table (shapes, arguments, inputs an
// operator refuses) and in the comparison without a GPU.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>

#include "lockstep/core/device_backend.h"
#include "op_cases.h"

namespace lockstep::testing {

namespace {

const Device kCpu{DeviceType::kCpu, 0};
const Device kGpu{DeviceType::kCuda, 0};

bool HaveGpu() {
  DeviceBackend* cuda = FindDeviceBackend(DeviceType::kCuda);
  return cuda != nullptr && cuda->DeviceCount() > 0;
}

bool CpuOnly() {
  const char* value = std::getenv("LOCKSTEP_TABLE_CPU_ONLY");
  return value != nullptr && std::strcmp(value, "1") == 0;
}

class CudaOpTable : public ::testing::TestWithParam<OpCase> {};

// In CPU-only mode a second CPU run stands in for the device, so that the comparison itself is exercised.
TEST_P(CudaOpTable, MatchesTheCpu) {
  const Device device = CpuOnly() ? kCpu : kGpu;
  if (device == kGpu && !HaveGpu()) GTEST_SKIP() << "no GPU";
  ExpectSameOnCpuAnd(GetParam(), device);
}

// The table itself is checked on every machine: each case runs on the CPU twice and agrees with itself, so a
// case with a wrong shape or argument fails here, not first on a GPU.
TEST(CudaOps, EveryCaseRunsOnTheCpu) {
  ASSERT_GE(OpCases().size(), 150u);
  for (const auto& c : OpCases()) {
    SCOPED_TRACE(c.name);
    ExpectSameOnCpuAnd(c, kCpu);
  }
}

INSTANTIATE_TEST_SUITE_P(CudaOps, CudaOpTable, ::testing::ValuesIn(OpCases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; });

class CudaLowPrecisionOpTable : public ::testing::TestWithParam<OpCase> {};

// The operators of a float16 or bfloat16 pass against the CPU in float32 on the same (16-bit) values
// (low_precision_ops_test.cc runs the bfloat16 cases on the CPU).
TEST_P(CudaLowPrecisionOpTable, MatchesTheCpuInFloat32) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  ExpectSameOnCpuAnd(GetParam(), kGpu);
}

INSTANTIATE_TEST_SUITE_P(CudaOps, CudaLowPrecisionOpTable, ::testing::ValuesIn(LowPrecisionCases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; });

// Every 16-bit type of every operator a 16-bit pass runs has cases, and each narrows an input.
TEST(CudaOps, LowPrecisionCasesCoverBothTypes) {
  std::set<std::string> float16, bfloat16;
  for (const auto& c : LowPrecisionCases()) {
    ASSERT_FALSE(c.narrowed.empty()) << c.name;
    (c.narrow_to == DataType::kFloat16 ? float16 : bfloat16).insert(c.op.type());
  }
  EXPECT_EQ(float16, bfloat16);
  for (const char* type : {"Conv", "ConvGradient", "FC", "FCGradient", "Relu", "MaxPool", "SpatialBN",
                           "SpatialBNGradient", "Sum"})
    EXPECT_TRUE(float16.count(type)) << type << " has no 16-bit case";
}

class CudaOpGradient : public ::testing::TestWithParam<GradientCase> {};

// CheckGradient feeds the inputs in host memory; the CUDA operator copies them to the device on every run,
// so the host perturbations reach it, and its outputs come back to the host to be compared.
TEST_P(CudaOpGradient, MatchesFiniteDifferencesOnTheDevice) {
  const GradientCase& c = GetParam();
  const bool cpu_only = CpuOnly();
  if (!cpu_only && !HaveGpu()) GTEST_SKIP() << "no GPU";
  OperatorDef def = c.op;
  SetDevice(&def, cpu_only ? kCpu : kGpu);
  CheckGradient(def, c.inputs, c.options);
}

INSTANTIATE_TEST_SUITE_P(CudaOps, CudaOpGradient, ::testing::ValuesIn(GradientCases()),
                         [](const ::testing::TestParamInfo<GradientCase>& info) { return info.param.name; });

// CPU operator types, without those that tests register for themselves.
std::vector<std::string> LibraryCpuOperators() {
  const auto& test_only = TestOnlyOperators();
  std::vector<std::string> types;
  for (const auto& type : OperatorRegistry::Types(DeviceType::kCpu))
    if (std::find(test_only.begin(), test_only.end(), type) == test_only.end()) types.push_back(type);
  return types;
}

// Reads the registries only, so it runs without a GPU.
TEST(CudaOps, EveryCpuOperatorHasACudaImplementation) {
  auto cuda_types = OperatorRegistry::Types(DeviceType::kCuda);
  std::set<std::string> cuda(cuda_types.begin(), cuda_types.end());
  std::vector<std::string> missing;
  for (const auto& type : LibraryCpuOperators())
    if (!cuda.count(type) && !CpuOnlyOperators().count(type)) missing.push_back(type);
  for (const auto& [type, reason] : CpuOnlyOperators())
    EXPECT_FALSE(cuda.count(type)) << type << " is listed as CPU only but has a CUDA implementation";
  EXPECT_TRUE(missing.empty()) << missing.size() << " CPU operators have no CUDA implementation: "
                               << fmt::format("{}", fmt::join(missing, ", "));
}

TEST(CudaOps, EveryCpuOperatorHasACase) {
  std::set<std::string> covered, names;
  for (const auto& c : OpCases()) {
    covered.insert(c.op.type());
    EXPECT_TRUE(names.insert(c.name).second) << "two cases are named " << c.name;
  }
  const auto cpu_types = LibraryCpuOperators();
  const auto& excluded = OperatorsWithoutCases();
  std::vector<std::string> missing;
  for (const auto& type : cpu_types)
    if (!covered.count(type) && !excluded.count(type)) missing.push_back(type);
  EXPECT_TRUE(missing.empty()) << "CPU operators without a case in op_cases.cc: "
                               << fmt::format("{}", fmt::join(missing, ", "));
  // An exclusion outlives its reason when the operator is gone or has gained a case.
  for (const auto& [type, reason] : excluded) {
    EXPECT_TRUE(std::count(cpu_types.begin(), cpu_types.end(), type))
        << type << " is excluded but not a CPU operator";
    EXPECT_FALSE(covered.count(type)) << type << " is excluded but has a case";
  }
}

}  // namespace
}  // namespace lockstep::testing
