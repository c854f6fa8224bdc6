// The operators that have no CUDA implementation on purpose (CpuOnlyOperators, tests/cpu_only_operators.cc):
// asked for on a CUDA device, each is refused in one line that names it and says what to do. Runs without a
// GPU: the lookup fails before any device is touched.
#include "lockstep/core/device_backend.h"
#include "lockstep/core/operator.h"
#include "op_cases.h"

namespace lockstep::testing {
namespace {

TEST(CpuOnlyOps, ACudaDeviceRefusesEachInOneLineNamingIt) {
  ASSERT_FALSE(CpuOnlyOperators().empty());
  for (const auto& [type, reason] : CpuOnlyOperators()) {
    OperatorDef def = MakeOperatorDef(type, {"x"}, {"y"});
    def.mutable_device_option()->set_device_type(static_cast<int>(DeviceType::kCuda));
    Workspace ws;
    try {
      CreateOperator(def, &ws);
      ADD_FAILURE() << type << " was created on a CUDA device";
    } catch (const InvalidInput& e) {
      const std::string message = e.what();
      // A build without CUDA says so, whatever the operator.
      const std::string why = FindDeviceBackend(DeviceType::kCuda)
                                  ? "operator '" + type + "' has no CUDA implementation"
                                  : "this lockstep was built without CUDA";
      EXPECT_NE(message.find(why), std::string::npos) << message;
      EXPECT_NE(message.find("the CPU"), std::string::npos) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace lockstep::testing
