// Relu forward values and finite-difference gradient.
#include "test_util.h"

namespace lockstep::testing {

TEST(ReluOp, ForwardClampsNegatives) {
  Workspace ws;
  Feed(&ws, "x", TensorFromValues({2, 2}, {-1.5f, 0.5f, 2.0f, -0.25f}));
  RunOp(&ws, MakeOperatorDef("Relu", {"x"}, {"y"}));
  EXPECT_EQ(Values(ws.Blob("y")), (std::vector<float>{0.0f, 0.5f, 2.0f, 0.0f}));
}

TEST(ReluOp, Gradient) {
  // Keep inputs away from the kink at 0 so finite differences are exact.
  Tensor x = RandomTensor({2, 3, 4, 5}, 7, 0.1f, 1.0f);
  float* data = x.data<float>();
  for (int64_t i = 0; i < x.numel(); i += 2) data[i] = -data[i];
  CheckGradient(MakeOperatorDef("Relu", {"x"}, {"y"}), {{"x", x}});
}

}  // namespace lockstep::testing
