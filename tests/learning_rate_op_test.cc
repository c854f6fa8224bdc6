// LearningRate schedules against hand-computed values, warm-up, and argument validation.
#include <cmath>

#include "test_util.h"

namespace lockstep::testing {
namespace {

float LearningRateAt(int64_t iter, std::vector<Arg> args, Shape iter_shape = {}) {
  Workspace ws;
  Tensor it(iter_shape, DataType::kInt64);
  *it.data<int64_t>() = iter;
  Feed(&ws, "iter", it);
  RunOp(&ws, MakeOperatorDef("LearningRate", {"iter"}, {"lr"}, args));
  const Tensor& lr = ws.Blob("lr");
  EXPECT_EQ(lr.shape(), Shape{});
  return *lr.data<float>();
}

}  // namespace

TEST(LearningRateOp, Fixed) {
  for (int64_t iter : {0, 1, 1000}) EXPECT_FLOAT_EQ(LearningRateAt(iter, {Arg("base_lr", 0.1f)}), 0.1f);
  // iter may also be a (1,) tensor.
  EXPECT_FLOAT_EQ(LearningRateAt(5, {Arg("base_lr", 0.1f), Arg("policy", "fixed")}, {1}), 0.1f);
}

TEST(LearningRateOp, Step) {
  std::vector<Arg> args{Arg("base_lr", 0.2f), Arg("policy", "step"), Arg("stepsize", 10), Arg("gamma", 0.5f)};
  EXPECT_FLOAT_EQ(LearningRateAt(0, args), 0.2f);
  EXPECT_FLOAT_EQ(LearningRateAt(9, args), 0.2f);
  EXPECT_FLOAT_EQ(LearningRateAt(10, args), 0.1f);
  EXPECT_FLOAT_EQ(LearningRateAt(25, args), 0.05f);
  EXPECT_FLOAT_EQ(LearningRateAt(30, args), 0.025f);
}

TEST(LearningRateOp, Multistep) {
  std::vector<Arg> args{Arg("base_lr", 1.0f), Arg("policy", "multistep"),
                        Arg("stepsizes", std::vector<int>{5, 10}), Arg("gamma", 0.1f)};
  EXPECT_FLOAT_EQ(LearningRateAt(0, args), 1.0f);
  EXPECT_FLOAT_EQ(LearningRateAt(4, args), 1.0f);
  EXPECT_FLOAT_EQ(LearningRateAt(5, args), 0.1f);
  EXPECT_FLOAT_EQ(LearningRateAt(9, args), 0.1f);
  EXPECT_FLOAT_EQ(LearningRateAt(10, args), 0.01f);
  EXPECT_FLOAT_EQ(LearningRateAt(1000, args), 0.01f);
}

// Caffe2's exp, inv and poly schedules.
TEST(LearningRateOp, ExpInvPoly) {
  std::vector<Arg> exp{Arg("base_lr", 0.5f), Arg("policy", "exp"), Arg("gamma", 0.9f)};
  EXPECT_FLOAT_EQ(LearningRateAt(0, exp), 0.5f);
  EXPECT_FLOAT_EQ(LearningRateAt(3, exp), 0.5f * 0.729f);
  std::vector<Arg> inv{Arg("base_lr", 0.1f), Arg("policy", "inv"), Arg("gamma", 0.5f), Arg("power", 2.0f)};
  EXPECT_FLOAT_EQ(LearningRateAt(0, inv), 0.1f);
  EXPECT_FLOAT_EQ(LearningRateAt(2, inv), 0.1f / 4);  // (1 + 0.5 * 2)^-2
  EXPECT_FLOAT_EQ(LearningRateAt(6, inv), 0.1f / 16);
  std::vector<Arg> poly{Arg("base_lr", 0.8f), Arg("policy", "poly"), Arg("max_iter", 100),
                        Arg("power", 0.5f)};
  EXPECT_FLOAT_EQ(LearningRateAt(0, poly), 0.8f);
  EXPECT_FLOAT_EQ(LearningRateAt(75, poly), 0.4f);  // (1 - 0.75)^0.5
  EXPECT_FLOAT_EQ(LearningRateAt(100, poly), 0.0f);
  EXPECT_FLOAT_EQ(LearningRateAt(150, poly), 0.0f);  // held at 0 past max_iter
}

TEST(LearningRateOp, Cosine) {
  std::vector<Arg> args{Arg("base_lr", 0.4f), Arg("policy", "cosine"), Arg("max_iter", 100)};
  EXPECT_FLOAT_EQ(LearningRateAt(0, args), 0.4f);
  EXPECT_FLOAT_EQ(LearningRateAt(50, args), 0.2f);
  EXPECT_FLOAT_EQ(LearningRateAt(25, args), static_cast<float>(0.4 * 0.5 * (1 + std::cos(M_PI * 0.25))));
  EXPECT_NEAR(LearningRateAt(100, args), 0.0f, 1e-7f);
  // Past max_iter the rate stays at its final value.
  EXPECT_NEAR(LearningRateAt(150, args), 0.0f, 1e-7f);
}

TEST(LearningRateOp, LinearWarmup) {
  std::vector<Arg> args{Arg("base_lr", 2.0f), Arg("warmup_iter", 10), Arg("warmup_start_factor", 0.25f)};
  EXPECT_FLOAT_EQ(LearningRateAt(0, args), 0.5f);
  EXPECT_FLOAT_EQ(LearningRateAt(4, args), 2.0f * (0.25f + 0.75f * 0.4f));
  EXPECT_FLOAT_EQ(LearningRateAt(9, args), 2.0f * (0.25f + 0.75f * 0.9f));
  EXPECT_FLOAT_EQ(LearningRateAt(10, args), 2.0f);
  EXPECT_FLOAT_EQ(LearningRateAt(50, args), 2.0f);
  // The default start factor is 0.1.
  EXPECT_FLOAT_EQ(LearningRateAt(0, {Arg("base_lr", 1.0f), Arg("warmup_iter", 5)}), 0.1f);
}

TEST(LearningRateOp, WarmupMultipliesTheSchedule) {
  std::vector<Arg> args{Arg("base_lr", 1.0f), Arg("policy", "step"), Arg("stepsize", 4),
                        Arg("gamma", 0.5f),   Arg("warmup_iter", 8), Arg("warmup_start_factor", 0.0f)};
  EXPECT_FLOAT_EQ(LearningRateAt(0, args), 0.0f);
  EXPECT_FLOAT_EQ(LearningRateAt(2, args), 1.0f * 0.25f);
  EXPECT_FLOAT_EQ(LearningRateAt(6, args), 0.5f * 0.75f);
  EXPECT_FLOAT_EQ(LearningRateAt(8, args), 0.25f);
}

TEST(LearningRateOp, UnknownPolicyListsTheValidOnes) {
  Workspace ws;
  auto def = MakeOperatorDef("LearningRate", {"iter"}, {"lr"}, {Arg("base_lr", 0.1f), Arg("policy", "hill")});
  try {
    CreateOperator(def, &ws);
    FAIL() << "expected InvalidInput";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("unknown policy 'hill'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fixed, step, multistep, exp, inv, poly, cosine"), std::string::npos)
        << e.what();
  }
}

TEST(LearningRateOp, RejectsIncompleteArguments) {
  Workspace ws;
  auto create = [&](std::vector<Arg> args) {
    CreateOperator(MakeOperatorDef("LearningRate", {"iter"}, {"lr"}, args), &ws);
  };
  EXPECT_THROW(create({Arg("policy", "fixed")}), InvalidInput);
  EXPECT_THROW(create({Arg("base_lr", 0.1f), Arg("policy", "step"), Arg("gamma", 0.1f)}), InvalidInput);
  EXPECT_THROW(create({Arg("base_lr", 0.1f), Arg("policy", "multistep"), Arg("gamma", 0.1f)}), InvalidInput);
  EXPECT_THROW(create({Arg("base_lr", 0.1f), Arg("policy", "cosine")}), InvalidInput);
  EXPECT_THROW(create({Arg("base_lr", 0.1f), Arg("policy", "exp")}), InvalidInput);
  EXPECT_THROW(create({Arg("base_lr", 0.1f), Arg("policy", "inv"), Arg("gamma", 0.1f)}), InvalidInput);
  EXPECT_THROW(create({Arg("base_lr", 0.1f), Arg("policy", "poly"), Arg("power", 2.0f)}), InvalidInput);
}

TEST(LearningRateOp, RejectsFloatIter) {
  Workspace ws;
  Feed(&ws, "iter", TensorFromValues({}, {1.0f}));
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("LearningRate", {"iter"}, {"lr"}, {Arg("base_lr", 0.1f)})),
               InvalidInput);
}

}  // namespace lockstep::testing
