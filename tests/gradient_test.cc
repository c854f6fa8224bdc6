// AddGradientOperators: structure of the generated backward pass and its values.
#include "test_util.h"

namespace lockstep::testing {

namespace {
std::vector<std::string> Types(const NetDef& net, int from) {
  std::vector<std::string> types;
  for (int i = from; i < net.op_size(); ++i) types.push_back(net.op(i).type());
  return types;
}
}  // namespace

TEST(Gradient, BlobReadTwiceGetsSummedGradient) {
  // y = relu(x) + relu(x) read through two ops: dy/dx must be the sum of both partials.
  NetDef net;
  net.set_name("twice");
  *net.add_op() = MakeOperatorDef("Relu", {"x"}, {"a"});
  *net.add_op() = MakeOperatorDef("Scale", {"a"}, {"b"}, {Arg("scale", 2.0f)});
  *net.add_op() = MakeOperatorDef("Scale", {"a"}, {"c"}, {Arg("scale", 3.0f)});
  *net.add_op() = MakeOperatorDef("Sum", {"b", "c"}, {"y"});
  auto grads = AddGradientOperators(&net, {"y"}, {"x"});
  ASSERT_EQ(grads.at("x"), "x_grad");
  auto types = Types(net, 4);
  EXPECT_EQ(std::count(types.begin(), types.end(), "Sum"), 1) << "partials of 'a' are summed once";

  Workspace ws;
  Feed(&ws, "x", TensorFromValues({4}, {-1.0f, 0.5f, 2.0f, -3.0f}));
  net.set_name("twice");
  ws.RunNetOnce(net);
  EXPECT_EQ(Values(ws.Blob("x_grad")), (std::vector<float>{0.0f, 5.0f, 5.0f, 0.0f}));
}

TEST(Gradient, InplaceOpsChainGradients) {
  NetDef net;
  net.set_name("inplace");
  *net.add_op() = MakeOperatorDef("Scale", {"x"}, {"h"}, {Arg("scale", -1.0f)});
  *net.add_op() = MakeOperatorDef("Relu", {"h"}, {"h"});
  *net.add_op() = MakeOperatorDef("Scale", {"h"}, {"y"}, {Arg("scale", 4.0f)});
  AddGradientOperators(&net, {"y"}, {"x"});
  Workspace ws;
  Feed(&ws, "x", TensorFromValues({3}, {-1.0f, 2.0f, -0.5f}));
  ws.RunNetOnce(net);
  EXPECT_EQ(Values(ws.Blob("x_grad")), (std::vector<float>{-4.0f, 0.0f, -4.0f}));
}

TEST(Gradient, OnlyRequestedBlobsAndTheirDescendantsGetGradients) {
  NetDef net;
  *net.add_op() = MakeOperatorDef("Relu", {"data"}, {"d"});
  *net.add_op() = MakeOperatorDef("Sum", {"d", "w"}, {"y"});
  auto grads = AddGradientOperators(&net, {"y"}, {"w"});
  EXPECT_EQ(grads.count("w"), 1u);
  EXPECT_EQ(grads.count("data"), 0u);
  for (const auto& type : Types(net, 2)) EXPECT_NE(type, "ReluGradient") << "no gradient flows into data";
  for (int i = 2; i < net.op_size(); ++i) EXPECT_TRUE(net.op(i).is_gradient_op());
}

TEST(Gradient, OpWithoutGradientOnThePathIsAnError) {
  NetDef net;
  *net.add_op() = MakeOperatorDef("Iter", {"w"}, {"w2"});
  *net.add_op() = MakeOperatorDef("Relu", {"w2"}, {"y"});
  // Iter is registered as non-differentiable: no error, and no gradient reaches w.
  auto grads = AddGradientOperators(&net, {"y"}, {"w"});
  EXPECT_EQ(grads.count("w"), 0u);
  NetDef bad;
  *bad.add_op() = MakeOperatorDef("ReluGradient", {"w", "w"}, {"y"});
  EXPECT_THROW(AddGradientOperators(&bad, {"y"}, {"w"}), InvalidInput);
}

TEST(Gradient, AddPassesGradientThroughWithoutCopies) {
  // y = (a + b) + a: a's gradient is 2 dy, b's is dy, and no op copies dy.
  NetDef net;
  *net.add_op() = MakeOperatorDef("Add", {"a", "b"}, {"c"});
  *net.add_op() = MakeOperatorDef("Add", {"c", "a"}, {"y"});
  auto grads = AddGradientOperators(&net, {"y"}, {"a", "b"});
  EXPECT_EQ(Types(net, 2), (std::vector<std::string>{"ConstantFill", "Sum"}));
  EXPECT_EQ(grads.at("b"), "y_grad");
  Workspace ws;
  Feed(&ws, "a", TensorFromValues({2}, {1.0f, 2.0f}));
  Feed(&ws, "b", TensorFromValues({2}, {3.0f, 4.0f}));
  ws.RunNetOnce(net);
  EXPECT_EQ(Values(ws.Blob(grads.at("a"))), (std::vector<float>{2.0f, 2.0f}));
  EXPECT_EQ(Values(ws.Blob(grads.at("b"))), (std::vector<float>{1.0f, 1.0f}));
}

TEST(Gradient, UnknownLossIsAnError) {
  NetDef net;
  *net.add_op() = MakeOperatorDef("Relu", {"x"}, {"y"});
  try {
    AddGradientOperators(&net, {"nope"}, {"x"});
    ADD_FAILURE() << "a loss no operator writes was accepted";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()).rfind("loss 'nope' is not computed by net", 0), 0u) << e.what();
  }
}

}  // namespace lockstep::testing
