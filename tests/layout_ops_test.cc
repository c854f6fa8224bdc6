// NHWC2NCHW and NCHW2NHWC against index arithmetic, their round trip, bad ranks and gradients.
#include "test_util.h"

namespace lockstep::testing {
namespace {

TEST(LayoutOps, NhwcToNchwMovesEachValueWhereIndexArithmeticSays) {
  const int64_t n = 2, h = 3, w = 4, c = 5;
  const Tensor x = RandomTensor({n, h, w, c}, 41);
  Workspace ws;
  Feed(&ws, "x", x);
  RunOp(&ws, MakeOperatorDef("NHWC2NCHW", {"x"}, {"y"}));
  const Tensor& y = ws.Blob("y");
  ASSERT_EQ(y.shape(), (Shape{n, c, h, w}));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t r = 0; r < h; ++r)
        for (int64_t s = 0; s < w; ++s)
          ASSERT_EQ(y.data<float>()[((i * c + k) * h + r) * w + s],
                    x.data<float>()[((i * h + r) * w + s) * c + k])
              << i << " " << k << " " << r << " " << s;
  RunOp(&ws, MakeOperatorDef("NCHW2NHWC", {"y"}, {"back"}));
  EXPECT_EQ(ws.Blob("back").shape(), x.shape());
  EXPECT_EQ(Values(ws.Blob("back")), Values(x));
}

TEST(LayoutOps, OnlyFourDimensionsAreAccepted) {
  Workspace ws;
  Feed(&ws, "x", RandomTensor({2, 3, 4}, 1));
  try {
    RunOp(&ws, MakeOperatorDef("NCHW2NHWC", {"x"}, {"y"}));
    FAIL() << "a 3-D X was accepted";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("X must be 4-D (N, C, H, W), got (2, 3, 4)"), std::string::npos)
        << e.what();
  }
}

TEST(LayoutOps, Gradients) {
  CheckGradient(MakeOperatorDef("NHWC2NCHW", {"x"}, {"y"}), {{"x", RandomTensor({2, 2, 3, 3}, 42)}});
  CheckGradient(MakeOperatorDef("NCHW2NHWC", {"x"}, {"y"}), {{"x", RandomTensor({1, 3, 2, 2}, 43)}});
}

}  // namespace
}  // namespace lockstep::testing
