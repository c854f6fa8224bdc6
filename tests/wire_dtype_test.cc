// The 16-bit gradient wire's pieces: narrowing rounds to nearest even and widens back exactly, a hop adds in
// float32 and rounds once, and float16's scale is the power of two that keeps k summands below 2^15.
#include "lockstep/comm/wire_dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "lockstep/core/half.h"

namespace lockstep::testing {
namespace {

std::vector<uint16_t> Narrow(const std::vector<float>& values, DataType wire, float scale = 1) {
  std::vector<uint16_t> bits(values.size());
  NarrowToWire(values.data(), values.size(), wire, scale, bits.data());
  return bits;
}

TEST(WireDtype, NamesParseAndAnythingElseIsRefusedInOneLine) {
  EXPECT_EQ(ParseFloatType("float", "--allreduce_dtype"), DataType::kFloat);
  EXPECT_EQ(ParseFloatType("float32", "--allreduce_dtype"), DataType::kFloat) << "DataTypeName's spelling";
  EXPECT_EQ(ParseFloatType("bfloat16", "--allreduce_dtype"), DataType::kBFloat16);
  EXPECT_EQ(ParseFloatType("float16", "--allreduce_dtype"), DataType::kFloat16);
  try {
    ParseFloatType("fp8", "--allreduce_dtype");
    FAIL() << "fp8 was accepted";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "unknown --allreduce_dtype 'fp8'; choose float, bfloat16 or float16");
  }
}

TEST(WireDtype, BFloat16RoundsToNearestEvenAndWidensExactly) {
  const float one = 1.0f, tie_down = 1.0f + std::ldexp(1.0f, -8), tie_up = 1.0f + 3 * std::ldexp(1.0f, -8);
  const float above_tie = std::nextafter(tie_down, 2.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<uint16_t> bits =
      Narrow({one, tie_down, tie_up, above_tie, -2.5f, inf, nan}, DataType::kBFloat16);
  EXPECT_EQ(bits[0], 0x3f80);
  EXPECT_EQ(bits[1], 0x3f80) << "a tie rounds to the even neighbour, down";
  EXPECT_EQ(bits[2], 0x3f82) << "a tie rounds to the even neighbour, up";
  EXPECT_EQ(bits[3], 0x3f81);
  EXPECT_EQ(bits[4], 0xc020);
  EXPECT_EQ(bits[5], 0x7f80);
  EXPECT_TRUE((bits[6] & 0x7fff) > 0x7f80) << "NaN stays NaN";
  std::vector<float> back(bits.size());
  WidenFromWire(bits.data(), bits.size(), DataType::kBFloat16, 1, back.data());
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[2], 1.0f + 4 * std::ldexp(1.0f, -8));
  EXPECT_EQ(back[4], -2.5f);
  EXPECT_TRUE(std::isinf(back[5]));
  EXPECT_TRUE(std::isnan(back[6]));
}

TEST(WireDtype, Float16ScalesBeforeNarrowingAndUnscalesAfterWidening) {
  const float scale = 1024;
  std::vector<float> values{1e-6f, -3.0e-7f, 0.0f, 5.0f};
  std::vector<uint16_t> bits = Narrow(values, DataType::kFloat16, scale);
  std::vector<float> back(values.size());
  WidenFromWire(bits.data(), bits.size(), DataType::kFloat16, scale, back.data());
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_LE(std::fabs(back[i] - values[i]), std::ldexp(std::fabs(values[i]), -11)) << values[i];
  EXPECT_EQ(bits[3], ToFloat16(5.0f * scale).bits);
}

TEST(WireDtype, AHopAddsInFloat32AndRoundsOnce) {
  // 256 + 1 is not a bfloat16; summed in bfloat16 the 1 would vanish at every hop, in float32 it carries.
  std::vector<BFloat16> x{ToBFloat16(256.0f), ToBFloat16(1.5f), ToBFloat16(-3.0f)};
  std::vector<BFloat16> y{ToBFloat16(1.0f), ToBFloat16(1.5f), ToBFloat16(3.0f)};
  SumBFloat16(x.data(), y.data(), x.size());
  EXPECT_EQ(ToFloat(x[0]), 256.0f) << "257 rounds to the even 256";
  EXPECT_EQ(ToFloat(x[1]), 3.0f);
  EXPECT_EQ(ToFloat(x[2]), 0.0f);
  std::vector<Float16> a{ToFloat16(2048.0f), ToFloat16(0.1f)}, b{ToFloat16(3.0f), ToFloat16(0.2f)};
  SumFloat16(a.data(), b.data(), a.size());
  EXPECT_EQ(ToFloat(a[0]), 2052.0f) << "2051 rounds to the even 2052";
  EXPECT_EQ(a[1].bits, ToFloat16(ToFloat(ToFloat16(0.1f)) + ToFloat(ToFloat16(0.2f))).bits);
}

TEST(WireDtype, Float16ScaleIsThePowerOfTwoThatKeepsTheSumBelowTwoToThe15) {
  for (float max_abs : {1e-30f, 1e-8f, 3e-4f, 1.0f, 7.0f, 65504.0f, 1e30f})
    for (int summands : {1, 2, 7, 64}) {
      const float scale = Float16WireScale(max_abs, summands);
      int exponent = 0;
      EXPECT_EQ(std::frexp(scale, &exponent), 0.5f) << "a power of two: " << scale;
      const double reach = double{max_abs} * summands * scale;
      if (exponent - 1 > -100 && exponent - 1 < 100) {
        EXPECT_LE(reach, 32768.0) << max_abs << " x " << summands;
        EXPECT_GT(reach, 16384.0) << max_abs << " x " << summands;
      }
    }
  EXPECT_EQ(Float16WireScale(0, 4), 1.0f);
  EXPECT_EQ(Float16WireScale(std::numeric_limits<float>::infinity(), 4), 1.0f);
  EXPECT_EQ(Float16WireScale(std::numeric_limits<float>::quiet_NaN(), 4), 1.0f);
  EXPECT_EQ(Float16WireScale(1.0f, 1), 32768.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> values{-3.0f, 2.0f};
  EXPECT_EQ(MaxAbs(values.data(), values.size()), 3.0f);
  values.push_back(nan);
  EXPECT_TRUE(std::isnan(MaxAbs(values.data(), values.size())));
}

}  // namespace
}  // namespace lockstep::testing
