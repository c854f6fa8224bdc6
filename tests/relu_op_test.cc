// Relu and LeakyRelu: forward values and finite-difference gradients.
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

TEST(LeakyReluOp, ForwardScalesNegatives) {
  Workspace ws;
  Feed(&ws, "x", TensorFromValues({2, 2}, {-1.5f, 0.5f, 2.0f, -0.25f}));
  RunOp(&ws, MakeOperatorDef("LeakyRelu", {"x"}, {"y"}, {Arg("alpha", 0.2f)}));
  EXPECT_EQ(Values(ws.Blob("y")), (std::vector<float>{-0.3f, 0.5f, 2.0f, -0.05f}));
  RunOp(&ws, MakeOperatorDef("LeakyRelu", {"x"}, {"x"}));  // Caffe2's default alpha, in place
  EXPECT_EQ(Values(ws.Blob("x")), (std::vector<float>{-0.015f, 0.5f, 2.0f, -0.0025f}));
}

TEST(LeakyReluOp, Gradient) {
  Tensor x = RandomTensor({2, 3, 4, 5}, 7, 0.1f, 1.0f);
  float* data = x.data<float>();
  for (int64_t i = 0; i < x.numel(); i += 2) data[i] = -data[i];
  CheckGradient(MakeOperatorDef("LeakyRelu", {"x"}, {"y"}, {Arg("alpha", 0.3f)}), {{"x", x}});
}

TEST(LeakyReluOp, RefusesNegativeAlpha) {
  Workspace ws;
  Feed(&ws, "x", TensorFromValues({2}, {-1.0f, 1.0f}));
  try {
    RunOp(&ws, MakeOperatorDef("LeakyRelu", {"x"}, {"y"}, {Arg("alpha", -0.5f)}));
    FAIL() << "a negative alpha was accepted";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("argument 'alpha' must be at least 0, got -0.5"), std::string::npos)
        << e.what();
  }
}

}  // namespace lockstep::testing
