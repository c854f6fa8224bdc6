// StopGradient: Y = X, and the backward pass adds nothing for what lies before it, in place too.
#include "test_util.h"

namespace lockstep::testing {
namespace {

TEST(StopGradientOp, CopiesXOrLeavesItInPlace) {
  Workspace ws;
  Feed(&ws, "x", TensorFromValues({2, 2}, {1.f, -2.f, 3.f, 4.f}));
  RunOp(&ws, MakeOperatorDef("StopGradient", {"x"}, {"y"}));
  EXPECT_EQ(Values(ws.Blob("y")), Values(ws.Blob("x")));
  RunOp(&ws, MakeOperatorDef("StopGradient", {"x"}, {"x"}));
  EXPECT_EQ(Values(ws.Blob("x")), (std::vector<float>{1.f, -2.f, 3.f, 4.f}));
}

// w feeds the loss twice: through Scale alone, and through a StopGradient. Only the first path counts.
TEST(StopGradientOp, NoGradientFlowsThroughIt) {
  for (bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "in place" : "to another blob");
    NetDef net;
    const std::string stopped = in_place ? "h" : "stopped";
    *net.add_op() = MakeOperatorDef("Scale", {"w"}, {"h"}, {Arg("scale", 3.f)});
    *net.add_op() = MakeOperatorDef("Scale", {"w"}, {"g"}, {Arg("scale", 2.f)});
    *net.add_op() = MakeOperatorDef("StopGradient", {"h"}, {stopped});
    *net.add_op() = MakeOperatorDef("Sum", {stopped, "g"}, {"y"});
    *net.add_op() = MakeOperatorDef("SumElements", {"y"}, {"loss"});
    auto gradients = AddGradientOperators(&net, {"loss"}, {"w"});
    int backward_scales = 0;  // Scale's gradient is a Scale
    for (const OperatorDef& op : net.op()) backward_scales += op.is_gradient_op() && op.type() == "Scale";
    EXPECT_EQ(backward_scales, 1) << "only g's Scale is on a path that gradient flows through";
    Workspace ws;
    Feed(&ws, "w", TensorFromValues({3}, {1.f, 2.f, 3.f}));
    ws.RunNetOnce(net);
    EXPECT_EQ(Values(ws.Blob(gradients.at("w"))), (std::vector<float>{2.f, 2.f, 2.f}));
  }
}

}  // namespace
}  // namespace lockstep::testing
