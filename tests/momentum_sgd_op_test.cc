// MomentumSGDUpdate (plain and Nesterov, with weight decay) against a reference loop over several steps.
#include "test_util.h"

namespace lockstep::testing {
namespace {

struct State {
  std::vector<float> grad_out, moment, param;
};

// The update written out element by element, in double.
State ReferenceStep(const std::vector<float>& grad, State s, float lr, float momentum, bool nesterov,
                    float decay) {
  s.grad_out.resize(grad.size());
  for (size_t i = 0; i < grad.size(); ++i) {
    double g = grad[i] + static_cast<double>(decay) * s.param[i];
    double adjusted;
    if (nesterov) {
      double m_new = momentum * static_cast<double>(s.moment[i]) + lr * g;
      adjusted = (1.0 + momentum) * m_new - momentum * static_cast<double>(s.moment[i]);
      s.moment[i] = static_cast<float>(m_new);
    } else {
      adjusted = lr * g + momentum * static_cast<double>(s.moment[i]);
      s.moment[i] = static_cast<float>(adjusted);
    }
    s.grad_out[i] = static_cast<float>(adjusted);
    s.param[i] = static_cast<float>(s.param[i] - adjusted);
  }
  return s;
}

void CheckSteps(bool nesterov, float decay, bool grad_in_place) {
  SCOPED_TRACE(::testing::Message() << "nesterov=" << nesterov << " decay=" << decay
                                    << " in_place=" << grad_in_place);
  const Shape shape{7, 13};
  const float lr = 0.05f, momentum = 0.9f;
  Workspace ws;
  Feed(&ws, "moment", RandomTensor(shape, 1, -0.1f, 0.1f));
  Feed(&ws, "param", RandomTensor(shape, 2));
  Feed(&ws, "lr", TensorFromValues({}, {lr}));
  State expected{{}, Values(ws.Blob("moment")), Values(ws.Blob("param"))};
  const std::string grad_out = grad_in_place ? "grad" : "adjusted";
  auto op = CreateOperator(
      MakeOperatorDef("MomentumSGDUpdate", {"grad", "moment", "lr", "param"}, {grad_out, "moment", "param"},
                      {Arg("momentum", momentum), Arg("nesterov", nesterov), Arg("weight_decay", decay)}),
      &ws);
  for (int step = 0; step < 3; ++step) {
    Tensor grad = RandomTensor(shape, 10 + step);
    Feed(&ws, "grad", grad);
    op->Run();
    expected = ReferenceStep(Values(grad), expected, lr, momentum, nesterov, decay);
    ExpectNear(ws.Blob(grad_out), TensorFromValues(shape, expected.grad_out), 1e-5f);
    ExpectNear(ws.Blob("moment"), TensorFromValues(shape, expected.moment), 1e-5f);
    ExpectNear(ws.Blob("param"), TensorFromValues(shape, expected.param), 1e-5f);
  }
}

}  // namespace

TEST(MomentumSGDUpdateOp, Plain) { CheckSteps(false, 0.0f, true); }
TEST(MomentumSGDUpdateOp, PlainWithWeightDecaySeparateGradOutput) { CheckSteps(false, 1e-2f, false); }
TEST(MomentumSGDUpdateOp, Nesterov) { CheckSteps(true, 0.0f, false); }
TEST(MomentumSGDUpdateOp, NesterovWithWeightDecay) { CheckSteps(true, 5e-3f, true); }

TEST(MomentumSGDUpdateOp, HandComputedStep) {
  // momentum 0.5, lr 0.1, decay 0.1: g' = 1 + 0.1 * 2 = 1.2; adjusted = 0.1 * 1.2 + 0.5 * 0.4 = 0.32.
  Workspace ws;
  Feed(&ws, "grad", TensorFromValues({1}, {1.0f}));
  Feed(&ws, "moment", TensorFromValues({1}, {0.4f}));
  Feed(&ws, "lr", TensorFromValues({}, {0.1f}));
  Feed(&ws, "param", TensorFromValues({1}, {2.0f}));
  RunOp(&ws,
        MakeOperatorDef("MomentumSGDUpdate", {"grad", "moment", "lr", "param"}, {"grad", "moment", "param"},
                        {Arg("momentum", 0.5f), Arg("weight_decay", 0.1f)}));
  EXPECT_FLOAT_EQ(Values(ws.Blob("grad"))[0], 0.32f);
  EXPECT_FLOAT_EQ(Values(ws.Blob("moment"))[0], 0.32f);
  EXPECT_FLOAT_EQ(Values(ws.Blob("param"))[0], 1.68f);
}

TEST(MomentumSGDUpdateOp, EnforcesInPlaceState) {
  Workspace ws;
  EXPECT_THROW(
      CreateOperator(MakeOperatorDef("MomentumSGDUpdate", {"g", "m", "lr", "p"}, {"g", "m2", "p"}), &ws),
      InvalidInput);
  EXPECT_THROW(
      CreateOperator(MakeOperatorDef("MomentumSGDUpdate", {"g", "m", "lr", "p"}, {"g", "m", "p2"}), &ws),
      InvalidInput);
}

TEST(MomentumSGDUpdateOp, RejectsMismatchedShapes) {
  Workspace ws;
  Feed(&ws, "g", RandomTensor({4}, 1));
  Feed(&ws, "m", RandomTensor({5}, 2));
  Feed(&ws, "lr", TensorFromValues({}, {0.1f}));
  Feed(&ws, "p", RandomTensor({4}, 3));
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("MomentumSGDUpdate", {"g", "m", "lr", "p"}, {"g", "m", "p"})),
               InvalidInput);
}

}  // namespace lockstep::testing
