// Dropout: the zero/scale pattern, determinism for a seed, test mode, and the gradient.
#include "test_util.h"

namespace lockstep::testing {
namespace {

OperatorDef DropoutDef(float ratio, unsigned seed, const std::vector<Arg>& extra = {}) {
  std::vector<Arg> args{Arg("ratio", ratio)};
  args.insert(args.end(), extra.begin(), extra.end());
  OperatorDef def = MakeOperatorDef("Dropout", {"x"}, {"y", "mask"}, args);
  def.mutable_device_option()->set_random_seed(seed);
  return def;
}

std::vector<uint8_t> MaskValues(const Tensor& mask) {
  const uint8_t* data = mask.data<uint8_t>();
  return std::vector<uint8_t>(data, data + mask.numel());
}

}  // namespace

TEST(DropoutOp, ZeroesDroppedAndScalesKept) {
  Workspace ws;
  Tensor x = RandomTensor({100, 100}, 1, 0.5f, 1.f);
  Feed(&ws, "x", x);
  RunOp(&ws, DropoutDef(0.3f, 7));
  const Tensor& y = ws.Blob("y");
  const Tensor& mask = ws.Blob("mask");
  ASSERT_EQ(mask.dtype(), DataType::kUInt8);
  ASSERT_EQ(mask.shape(), x.shape());
  int64_t kept = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    uint8_t m = mask.data<uint8_t>()[i];
    ASSERT_TRUE(m == 0 || m == 1);
    kept += m;
    float expected = m ? x.data<float>()[i] / 0.7f : 0.f;
    ASSERT_NEAR(y.data<float>()[i], expected, 1e-6f) << "at " << i;
  }
  // 10000 draws keep 7000 +- 46 (one standard deviation).
  EXPECT_NEAR(kept / 10000.0, 0.7, 0.02);
}

TEST(DropoutOp, SameSeedSameMasks) {
  Workspace a, b, c;
  for (Workspace* ws : {&a, &b, &c}) Feed(ws, "x", RandomTensor({64}, 1));
  auto op_a = CreateOperator(DropoutDef(0.5f, 42), &a);
  auto op_b = CreateOperator(DropoutDef(0.5f, 42), &b);
  auto op_c = CreateOperator(DropoutDef(0.5f, 43), &c);
  op_a->Run();
  op_b->Run();
  op_c->Run();
  std::vector<uint8_t> first = MaskValues(a.Blob("mask"));
  EXPECT_EQ(first, MaskValues(b.Blob("mask")));
  EXPECT_EQ(Values(a.Blob("y")), Values(b.Blob("y")));
  EXPECT_NE(first, MaskValues(c.Blob("mask")));
  // The next step draws a fresh mask, again the same for both.
  op_a->Run();
  op_b->Run();
  EXPECT_NE(first, MaskValues(a.Blob("mask")));
  EXPECT_EQ(MaskValues(a.Blob("mask")), MaskValues(b.Blob("mask")));
}

TEST(DropoutOp, InPlace) {
  Workspace ws;
  Tensor x = RandomTensor({50}, 3);
  Feed(&ws, "x", x);
  OperatorDef def = DropoutDef(0.5f, 5);
  def.set_output(0, "x");
  RunOp(&ws, def);
  for (int64_t i = 0; i < x.numel(); ++i)
    EXPECT_FLOAT_EQ(ws.Blob("x").data<float>()[i],
                    ws.Blob("mask").data<uint8_t>()[i] * 2.f * x.data<float>()[i]);
}

TEST(DropoutOp, TestModeIsIdentity) {
  Workspace ws;
  Tensor x = RandomTensor({3, 4}, 1);
  Feed(&ws, "x", x);
  RunOp(&ws, MakeOperatorDef("Dropout", {"x"}, {"y"}, {Arg("is_test", 1), Arg("ratio", 0.5f)}));
  EXPECT_EQ(Values(ws.Blob("y")), Values(x));
}

TEST(DropoutOp, TrainingNeedsMaskAndValidRatio) {
  Workspace ws;
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("Dropout", {"x"}, {"y"})), InvalidInput);
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("Dropout", {"x"}, {"y", "mask"}, {Arg("ratio", 1.f)})),
               InvalidInput);
}

TEST(DropoutOp, GradientUsesMask) {
  Workspace ws;
  Feed(&ws, "x", RandomTensor({40}, 1));
  RunOp(&ws, DropoutDef(0.25f, 9));
  Tensor dy = RandomTensor({40}, 2);
  Feed(&ws, "dy", dy);
  RunOp(&ws, MakeOperatorDef("DropoutGradient", {"dy", "mask"}, {"dx"}, {Arg("ratio", 0.25f)}));
  for (int64_t i = 0; i < dy.numel(); ++i)
    EXPECT_FLOAT_EQ(ws.Blob("dx").data<float>()[i],
                    ws.Blob("mask").data<uint8_t>()[i] ? dy.data<float>()[i] / 0.75f : 0.f);
}

// Finite differences rerun the forward op, which draws a new mask each time; ratio 0 and test mode keep the
// function fixed, and GradientUsesMask covers the masked case.
TEST(DropoutOp, Gradient) {
  CheckGradient(DropoutDef(0.f, 1), {{"x", RandomTensor({3, 5}, 1)}});
  CheckGradient(MakeOperatorDef("Dropout", {"x"}, {"y"}, {Arg("is_test", 1)}),
                {{"x", RandomTensor({3, 5}, 1)}});
}

TEST(DropoutOp, ShapeInference) {
  NetDef net;
  *net.add_op() = DropoutDef(0.5f, 1);
  auto shapes = InferNetShapes(net, {{"x", {{2, 3}}}});
  EXPECT_EQ(shapes["mask"].dims, (Shape{2, 3}));
  EXPECT_EQ(shapes["mask"].dtype, DataType::kUInt8);
}

}  // namespace lockstep::testing
