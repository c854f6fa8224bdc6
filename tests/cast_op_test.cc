// float16 / bfloat16 conversions (every 16-bit pattern round-trips; rounding is to nearest even; overflow,
// subnormals, inf and NaN as IEEE says) and the Cast operator with its gradient.
#include <cmath>
#include <limits>

#include "lockstep/core/half.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

TEST(Half, Float16KnownValues) {
  EXPECT_EQ(ToFloat16(1.0f).bits, 0x3c00);
  EXPECT_EQ(ToFloat16(-2.0f).bits, 0xc000);
  EXPECT_EQ(ToFloat16(0.1f).bits, 0x2e66);
  EXPECT_EQ(ToFloat16(65504.0f).bits, 0x7bff);               // the largest float16
  EXPECT_EQ(ToFloat16(65519.0f).bits, 0x7bff);               // still rounds down
  EXPECT_EQ(ToFloat16(65520.0f).bits, 0x7c00);               // halfway to 65536: ties to even, which is inf
  EXPECT_EQ(ToFloat16(std::ldexp(1.0f, -14)).bits, 0x0400);  // smallest normal
  EXPECT_EQ(ToFloat16(std::ldexp(1.0f, -24)).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(ToFloat16(std::ldexp(1.0f, -26)).bits, 0x0000);  // below half of it
  EXPECT_EQ(ToFloat16(-0.0f).bits, 0x8000);
  EXPECT_EQ(ToFloat16(std::numeric_limits<float>::infinity()).bits, 0x7c00);
  EXPECT_TRUE(std::isnan(ToFloat(ToFloat16(std::nanf("")))));
  // Ties go to the even neighbour: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(ToFloat16(1.0f + std::ldexp(1.0f, -11)).bits, 0x3c00);
  EXPECT_EQ(ToFloat16(1.0f + 3 * std::ldexp(1.0f, -11)).bits, 0x3c02);
  EXPECT_EQ(ToFloat16(1.0f + 1.5f * std::ldexp(1.0f, -11)).bits, 0x3c01) << "above the tie rounds up";
}

TEST(Half, EveryFloat16RoundTrips) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    Float16 h{static_cast<uint16_t>(bits)};
    float f = ToFloat(h);
    if (std::isnan(f)) {
      EXPECT_TRUE((bits & 0x7c00) == 0x7c00 && (bits & 0x3ff) != 0) << bits;
      continue;
    }
    ASSERT_EQ(ToFloat16(f).bits, bits) << f;
  }
  EXPECT_EQ(ToFloat(Float16{0x0001}), std::ldexp(1.0f, -24));
  EXPECT_EQ(ToFloat(Float16{0x7bff}), 65504.0f);
}

TEST(Half, BFloat16KnownValuesAndRoundTrips) {
  EXPECT_EQ(ToBFloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(ToBFloat16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80);      // tie, to even
  EXPECT_EQ(ToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)).bits, 0x3f82);  // tie, to even
  EXPECT_EQ(ToBFloat16(3.0e38f).bits, 0x7f62);
  EXPECT_EQ(ToBFloat16(std::numeric_limits<float>::max()).bits, 0x7f80) << "rounds to inf";
  EXPECT_TRUE(std::isnan(ToFloat(ToBFloat16(std::nanf("")))));
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    float f = ToFloat(BFloat16{static_cast<uint16_t>(bits)});
    if (!std::isnan(f)) ASSERT_EQ(ToBFloat16(f).bits, bits) << f;
  }
}

TEST(CastOp, ConvertsBothWaysAndLikeASecondInput) {
  Workspace ws;
  Feed(&ws, "x", TensorFromValues({2, 2}, {1.0f, -0.1f, 70000.0f, 3.14159f}));
  RunOp(&ws, MakeOperatorDef("Cast", {"x"}, {"h"}, {Arg("to", int(DataType::kFloat16))}));
  ASSERT_EQ(ws.Blob("h").dtype(), DataType::kFloat16);
  EXPECT_EQ(ws.Blob("h").shape(), (Shape{2, 2}));
  EXPECT_EQ(ws.Blob("h").data<Float16>()[1].bits, ToFloat16(-0.1f).bits);
  RunOp(&ws, MakeOperatorDef("Cast", {"h", "x"}, {"back"}));
  EXPECT_EQ(Values(ws.Blob("back")),
            (std::vector<float>{1.0f, ToFloat(ToFloat16(-0.1f)), std::numeric_limits<float>::infinity(),
                                ToFloat(ToFloat16(3.14159f))}));
  RunOp(&ws, MakeOperatorDef("Cast", {"x"}, {"b"}, {Arg("to", int(DataType::kBFloat16))}));
  EXPECT_EQ(ws.Blob("b").data<BFloat16>()[3].bits, ToBFloat16(3.14159f).bits);
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("Cast", {"x"}, {"y"}, {Arg("to", 5)})), InvalidInput) << "bool";
}

// Caffe2's MNIST casts uint8 pixels to float; floats become integers toward zero, and a value the target
// cannot hold is refused, naming the element.
TEST(CastOp, IntegersToAndFromFloats) {
  Workspace ws;
  Tensor pixels({4}, DataType::kUInt8);
  for (int i = 0; i < 4; ++i) pixels.data<uint8_t>()[i] = static_cast<uint8_t>(85 * i);
  Feed(&ws, "pixels", pixels);
  RunOp(&ws, MakeOperatorDef("Cast", {"pixels"}, {"data"}, {Arg("to", int(DataType::kFloat))}));
  EXPECT_EQ(Values(ws.Blob("data")), (std::vector<float>{0, 85, 170, 255}));
  RunOp(&ws, MakeOperatorDef("Cast", {"pixels"}, {"wide"}, {Arg("to", int(DataType::kInt64))}));
  EXPECT_EQ(ws.Blob("wide").data<int64_t>()[3], 255);

  Feed(&ws, "x", TensorFromValues({4}, {-1.7f, 2.9f, 0.5f, 3e9f}));
  auto cast = [&](const std::string& from, DataType to) {
    const std::string out = from + "_" + DataTypeName(to);
    RunOp(&ws, MakeOperatorDef("Cast", {from}, {out}, {Arg("to", int(to))}));
    return &ws.Blob(out);
  };
  auto refusal = [&](const std::string& from, DataType to) -> std::string {
    try {
      cast(from, to);
    } catch (const InvalidInput& e) {
      return e.what();
    }
    return "cast";
  };
  EXPECT_EQ(refusal("x", DataType::kInt32),
            "Cast(x) -> x_int32: element 3 is 3000000000, which int32 cannot hold");
  const Tensor* y = cast("x", DataType::kInt64);
  EXPECT_EQ(std::vector<int64_t>(y->data<int64_t>(), y->data<int64_t>() + 4),
            (std::vector<int64_t>{-1, 2, 0, 3000000000}));
  EXPECT_NE(refusal("x_int64", DataType::kUInt8).find("element 0 is -1, which uint8 cannot hold"),
            std::string::npos);
  y = cast("x_int64", DataType::kBFloat16);
  EXPECT_EQ(ToFloat(y->data<BFloat16>()[1]), 2.0f);
  EXPECT_EQ(refusal("x_int64", DataType::kFloat16),
            "Cast(x_int64) -> x_int64_float16: element 3 is 3000000000, which float16 cannot hold");
  Tensor big({1}, DataType::kInt64);
  big.data<int64_t>()[0] = (int64_t{1} << 62) + 1;
  Feed(&ws, "big", big);
  EXPECT_EQ(refusal("big", DataType::kInt32),
            "Cast(big) -> big_int32: element 0 is 4611686018427387905, which int32 cannot hold");
}

TEST(CastOp, GradientCastsBackToTheInputsDtype) {
  NetDef net;
  *net.add_op() = MakeOperatorDef("Cast", {"w"}, {"w16"}, {Arg("to", int(DataType::kBFloat16))});
  *net.add_op() = MakeOperatorDef("Cast", {"w16"}, {"loss"}, {Arg("to", int(DataType::kFloat))});
  auto grads = AddGradientOperators(&net, {"loss"}, {"w"});
  Workspace ws;
  Feed(&ws, "w", TensorFromValues({}, {2.5f}));
  ws.RunNetOnce(net);
  EXPECT_EQ(ws.Blob(grads.at("w")).dtype(), DataType::kFloat);
  EXPECT_EQ(Values(ws.Blob(grads.at("w"))), std::vector<float>{1.0f});
  EXPECT_EQ(ws.Blob("w16_grad").dtype(), DataType::kBFloat16);
}

// Caffe2's fixed casts: FloatToHalf rounds as Cast does, HalfToFloat widens exactly, each refuses the other's
// input, and each one's gradient is the other.
TEST(CastOp, FloatToHalfAndHalfToFloat) {
  Workspace ws;
  Feed(&ws, "x", TensorFromValues({3}, {1.0f, -0.1f, 70000.0f}));
  RunOp(&ws, MakeOperatorDef("FloatToHalf", {"x"}, {"h"}));
  ASSERT_EQ(ws.Blob("h").dtype(), DataType::kFloat16);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(ws.Blob("h").data<Float16>()[i].bits, ToFloat16(ws.Blob("x").data<float>()[i]).bits) << i;
  RunOp(&ws, MakeOperatorDef("HalfToFloat", {"h"}, {"back"}));
  EXPECT_EQ(Values(ws.Blob("back")),
            (std::vector<float>{1.0f, ToFloat(ToFloat16(-0.1f)), std::numeric_limits<float>::infinity()}));
  try {
    RunOp(&ws, MakeOperatorDef("HalfToFloat", {"x"}, {"y"}));
    FAIL() << "HalfToFloat took float32";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("'x' is float32, but HalfToFloat takes float16"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("FloatToHalf", {"h"}, {"y"})), InvalidInput);

  NetDef net;
  *net.add_op() = MakeOperatorDef("FloatToHalf", {"w"}, {"w16"});
  *net.add_op() = MakeOperatorDef("HalfToFloat", {"w16"}, {"loss"});
  auto grads = AddGradientOperators(&net, {"loss"}, {"w"});
  Feed(&ws, "w", TensorFromValues({}, {2.5f}));
  ws.RunNetOnce(net);
  EXPECT_EQ(ws.Blob("w16_grad").dtype(), DataType::kFloat16);
  EXPECT_EQ(ws.Blob(grads.at("w")).dtype(), DataType::kFloat);
  EXPECT_EQ(Values(ws.Blob(grads.at("w"))), std::vector<float>{1.0f});
  EXPECT_EQ(InferNetShapes(net, {{"w", {{}}}})["w16"].dtype, DataType::kFloat16);
}

}  // namespace
}  // namespace lockstep::testing
