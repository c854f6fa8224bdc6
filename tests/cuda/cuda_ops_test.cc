// Every operator on a CUDA device against the CPU (the table in cuda_op_cases.cc), the registered gradients
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

#include "cuda/cuda_op_cases.h"
#include "lockstep/core/device_backend.h"

namespace lockstep::testing {

// Prints a case by name in gtest's messages.
void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }
void PrintTo(const GradientCase& c, std::ostream* os) { *os << c.name; }

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

std::vector<std::string> Compared(const OpCase& c) {
  if (!c.compare.empty()) return c.compare;
  return {c.op.output().begin(), c.op.output().end()};
}

// Runs the case on `device` in a fresh workspace and returns the compared blobs in host memory, plain;
// nullopt (with a failure recorded) when an operator throws. The inputs start in the device's memory, where
// the operators before it in a net would have left them.
std::optional<Blobs> RunOn(const OpCase& c, const Device& device) {
  Workspace ws;
  try {
    if (c.prepare) c.prepare(&ws);
    const bool narrow = device.type != DeviceType::kCpu;
    for (const auto& [name, value] : c.inputs) {
      Tensor* blob = ws.CreateBlob(name);
      blob->PlaceOn(device);
      const bool narrowed = narrow && std::count(c.narrowed.begin(), c.narrowed.end(), name);
      blob->CopyFrom(narrowed ? Narrowed(value, c.narrow_to) : value);
    }
    for (OperatorDef setup : c.setup) {
      SetDevice(&setup, device);
      RunOp(&ws, setup);
    }
    OperatorDef def = c.op;
    SetDevice(&def, device);  // keeps the device option's random_seed
    auto op = CreateOperator(def, &ws);
    for (int run = 0; run < c.runs; ++run) op->Run();
    Blobs outputs;
    for (const auto& name : Compared(c)) {
      Tensor host;
      host.CopyFrom(ws.Blob(name));
      outputs[name] = Widened(Plain(host));
    }
    return outputs;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "on " << device.ToString() << ": " << e.what();
    return std::nullopt;
  }
}

// Within the tolerance for float blobs; bit for bit with tolerance 0 (where infinities must match too) and
// for every other dtype.
void ExpectSameBlob(const std::string& name, const Tensor& device, const Tensor& cpu, float tolerance) {
  SCOPED_TRACE("blob '" + name + "' (the device's first, the CPU's second)");
  ASSERT_EQ(DataTypeName(device.dtype()), std::string(DataTypeName(cpu.dtype())));
  ASSERT_EQ(ShapeToString(device.shape()), ShapeToString(cpu.shape()));
  const bool is_float = device.dtype() == DataType::kFloat;
  if (is_float && tolerance > 0) return ExpectNear(device, cpu, tolerance);
  const auto* a = static_cast<const uint8_t*>(device.raw_data());
  const auto* b = static_cast<const uint8_t*>(cpu.raw_data());
  const size_t element = ElementSize(device.dtype());
  for (int64_t i = 0; i < device.numel(); ++i)
    ASSERT_EQ(std::memcmp(a + i * element, b + i * element, element), 0)
        << "element " << i << " differs"
        << (is_float ? fmt::format(": {} vs {}", device.data<float>()[i], cpu.data<float>()[i]) : "");
}

// Runs the case on the CPU and on `device` and compares them (or checks each, for random outputs).
void ExpectSameOnCpuAnd(const OpCase& c, const Device& device) {
  auto cpu = RunOn(c, kCpu);
  auto other = RunOn(c, device);
  if (!cpu || !other) return;
  if (c.check) {
    c.check(c.inputs, *cpu);
    c.check(c.inputs, *other);
    return;
  }
  for (const auto& name : Compared(c)) ExpectSameBlob(name, other->at(name), cpu->at(name), c.tolerance);
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

// The operators of a float16 or bfloat16 pass against the CPU in float32 on the same (16-bit) values. The
// CPU computes in float32 only, so these run on a GPU alone.
TEST_P(CudaLowPrecisionOpTable, MatchesTheCpuInFloat32) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU (16-bit operators run on CUDA devices only)";
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
    if (!cuda.count(type)) missing.push_back(type);
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
  EXPECT_TRUE(missing.empty()) << "CPU operators without a case in cuda_op_cases.cc: "
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
