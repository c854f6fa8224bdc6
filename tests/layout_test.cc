// Activations kept in oneDNN's blocked layouts between Conv, Relu, MaxPool, AveragePool and FC, forward and
// backward, give the same values as the same chain with every intermediate forced plain.
#include "test_util.h"

namespace lockstep::testing {
namespace {

// Conv (16 -> 32 channels, wide enough for blocked layouts) -> Relu -> MaxPool -> Conv -> global AveragePool
// -> FC -> SoftmaxWithLoss, with its backward pass. With `force_plain` a Copy (which is not layout-aware, so
// it writes plain) follows every layer: each operator then reads plain activations and plain gradients.
NetDef Chain(bool force_plain) {
  NetDef net;
  net.set_name(force_plain ? "plain" : "blocked");
  // Adds `op` writing `output`, through a Copy when forcing plain.
  auto add = [&](const std::string& type, std::vector<std::string> inputs, const std::string& output,
                 std::vector<Arg> args) {
    std::string direct = force_plain ? output + "_layout" : output;
    *net.add_op() = MakeOperatorDef(type, inputs, {direct}, args);
    if (force_plain) *net.add_op() = MakeOperatorDef("Copy", {direct}, {output});
  };
  add("Conv", {"x", "w1", "b1"}, "y", {Arg("kernel", 3), Arg("pad", 1)});
  add("Relu", {"y"}, "r", {});
  add("MaxPool", {"r"}, "p", {Arg("kernel", 2), Arg("stride", 2)});
  add("Conv", {"p", "w2"}, "z", {Arg("kernel", 3), Arg("pad", 1)});
  add("AveragePool", {"z"}, "g", {Arg("global_pooling", 1)});
  add("FC", {"g", "w3", "b3"}, "out", {});
  *net.add_op() = MakeOperatorDef("SoftmaxWithLoss", {"out", "label"}, {"softmax", "loss"});
  AddGradientOperators(&net, {"loss"}, {"x", "w1", "b1", "w2", "w3", "b3"});
  return net;
}

void FeedInputs(Workspace* ws) {
  Feed(ws, "x", RandomTensor({2, 16, 8, 8}, 1));
  Feed(ws, "w1", RandomTensor({32, 16, 3, 3}, 2, -0.1f, 0.1f));
  Feed(ws, "b1", RandomTensor({32}, 3, -0.1f, 0.1f));
  Feed(ws, "w2", RandomTensor({32, 32, 3, 3}, 4, -0.1f, 0.1f));
  Feed(ws, "w3", RandomTensor({10, 32}, 5));
  Feed(ws, "b3", RandomTensor({10}, 6));
  Feed(ws, "label", Tensor(Shape{2}, DataType::kInt32));
  ws->GetBlob("label")->data<int32_t>()[0] = 3;
  ws->GetBlob("label")->data<int32_t>()[1] = 7;
}

TEST(Layout, BlockedChainMatchesPlainChain) {
  Workspace blocked, plain;
  FeedInputs(&blocked);
  FeedInputs(&plain);
  Net* blocked_net = blocked.CreateNet(Chain(false));
  Net* plain_net = plain.CreateNet(Chain(true));
  // Twice: the second run reuses the primitives, scratch buffers and blocked outputs of the first.
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE(run);
    blocked_net->Run();
    plain_net->Run();
    // The fast path is taken: activations and their gradients stay blocked between oneDNN operators.
    for (const char* name : {"y", "r", "p", "z", "g", "y_grad", "r_grad", "p_grad", "z_grad"})
      EXPECT_FALSE(blocked.Blob(name).is_plain()) << name;
    for (const char* name : {"y", "r", "p", "z", "g", "out", "loss", "y_grad", "r_grad", "p_grad", "z_grad",
                             "g_grad", "x_grad", "w1_grad", "b1_grad", "w2_grad", "w3_grad", "b3_grad"}) {
      SCOPED_TRACE(name);
      ExpectNear(blocked.Blob(name), plain.Blob(name), 1e-4f);
    }
    // Parameters' gradients stay plain for the optimizer.
    for (const char* name : {"w1_grad", "b1_grad", "w2_grad", "w3_grad", "b3_grad"})
      EXPECT_TRUE(blocked.Blob(name).is_plain()) << name;
  }
}

}  // namespace
}  // namespace lockstep::testing
