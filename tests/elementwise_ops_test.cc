// Add (plain and broadcast), Sum (including in place), Scale and SumReduceLike: values and gradients, and
// blocked-layout inputs against plain ones.
#include "lockstep/ops/dnnl_utils.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

// C = 20 pads the last block of 16 channels.
const Shape kBlockedShape{2, 20, 3, 5};

// Runs `def` on plain inputs and again with the inputs named in `blocked` given in nChw16c; the output must
// match and be blocked exactly when its first input is.
// The op on inputs of which `blocked_inputs` are channel-blocked matches it on plain ones; the output is
// blocked when the first input is, or (`any_blocked_input`) when any input is.
void ExpectBlockedMatchesPlain(const OperatorDef& def, const std::vector<std::string>& blocked_inputs,
                               bool any_blocked_input = false) {
  Workspace plain, blocked;
  for (int i = 0; i < def.input_size(); ++i) {
    if (plain.HasBlob(def.input(i))) continue;
    Tensor value = RandomTensor(kBlockedShape, 10 + i);
    Feed(&plain, def.input(i), value);
    bool is_blocked =
        std::find(blocked_inputs.begin(), blocked_inputs.end(), def.input(i)) != blocked_inputs.end();
    Feed(&blocked, def.input(i), is_blocked ? Blocked(value) : value);
  }
  const bool expect_blocked =
      any_blocked_input ? !blocked_inputs.empty() : !blocked.Blob(def.input(0)).is_plain();
  RunOp(&plain, def);
  RunOp(&blocked, def);
  const Tensor& output = blocked.Blob(def.output(0));
  EXPECT_EQ(output.is_plain(), !expect_blocked) << def.DebugString();
  ExpectNear(output, plain.Blob(def.output(0)), 1e-5f);
}

}  // namespace

TEST(ElementwiseOps, AddSameShape) {
  Workspace ws;
  Tensor a = RandomTensor({2, 3, 4}, 1), b = RandomTensor({2, 3, 4}, 2);
  Feed(&ws, "a", a);
  Feed(&ws, "b", b);
  RunOp(&ws, MakeOperatorDef("Add", {"a", "b"}, {"c"}));
  Tensor expected(a.shape(), DataType::kFloat);
  for (int64_t i = 0; i < a.numel(); ++i) expected.data<float>()[i] = a.data<float>()[i] + b.data<float>()[i];
  ExpectNear(ws.Blob("c"), expected, 1e-6f);
}

TEST(ElementwiseOps, AddBroadcastSuffix) {
  Workspace ws;
  Tensor a = RandomTensor({2, 3, 4}, 1), b = RandomTensor({3, 4}, 2);
  Feed(&ws, "a", a);
  Feed(&ws, "b", b);
  RunOp(&ws, MakeOperatorDef("Add", {"a", "b"}, {"c"}, {Arg("broadcast", 1)}));
  Tensor expected(a.shape(), DataType::kFloat);
  for (int64_t i = 0; i < a.numel(); ++i)
    expected.data<float>()[i] = a.data<float>()[i] + b.data<float>()[i % 12];
  ExpectNear(ws.Blob("c"), expected, 1e-6f);
}

TEST(ElementwiseOps, AddInPlaceOverEitherInput) {
  for (const char* target : {"a", "b"}) {
    Workspace ws;
    Feed(&ws, "a", TensorFromValues({3}, {1.f, 2.f, 3.f}));
    Feed(&ws, "b", TensorFromValues({3}, {10.f, 20.f, 30.f}));
    RunOp(&ws, MakeOperatorDef("Add", {"a", "b"}, {target}));
    EXPECT_EQ(Values(ws.Blob(target)), (std::vector<float>{11.f, 22.f, 33.f})) << target;
  }
}

TEST(ElementwiseOps, AddRejectsMismatchedShapes) {
  Workspace ws;
  Feed(&ws, "a", RandomTensor({2, 3}, 1));
  Feed(&ws, "b", RandomTensor({3}, 2));
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("Add", {"a", "b"}, {"c"})), InvalidInput);
  Feed(&ws, "b", RandomTensor({2}, 2));
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("Add", {"a", "b"}, {"c"}, {Arg("broadcast", 1)})), InvalidInput);
}

TEST(ElementwiseOps, AddGradient) {
  CheckGradient(MakeOperatorDef("Add", {"a", "b"}, {"c"}),
                {{"a", RandomTensor({2, 3}, 1)}, {"b", RandomTensor({2, 3}, 2)}});
  CheckGradient(MakeOperatorDef("Add", {"a", "b"}, {"c"}, {Arg("broadcast", 1)}),
                {{"a", RandomTensor({2, 3, 4}, 1)}, {"b", RandomTensor({4}, 2)}});
  // A broadcast whose suffix is the whole shape reduces nothing.
  CheckGradient(MakeOperatorDef("Add", {"a", "b"}, {"c"}, {Arg("broadcast", 1)}),
                {{"a", RandomTensor({2, 3}, 1)}, {"b", RandomTensor({2, 3}, 2)}});
}

TEST(ElementwiseOps, AddGradientOfOneInputOnly) {
  GradientCheckOptions options;
  options.inputs_to_check = {1};
  CheckGradient(MakeOperatorDef("Add", {"a", "b"}, {"c"}, {Arg("broadcast", 1)}),
                {{"a", RandomTensor({3, 2}, 1)}, {"b", RandomTensor({2}, 2)}}, options);
}

TEST(ElementwiseOps, SumOfThree) {
  Workspace ws;
  Feed(&ws, "x0", TensorFromValues({2, 2}, {1.f, 2.f, 3.f, 4.f}));
  Feed(&ws, "x1", TensorFromValues({2, 2}, {10.f, 20.f, 30.f, 40.f}));
  Feed(&ws, "x2", TensorFromValues({2, 2}, {100.f, 200.f, 300.f, 400.f}));
  RunOp(&ws, MakeOperatorDef("Sum", {"x0", "x1", "x2"}, {"y"}));
  EXPECT_EQ(Values(ws.Blob("y")), (std::vector<float>{111.f, 222.f, 333.f, 444.f}));
  RunOp(&ws, MakeOperatorDef("Sum", {"x1"}, {"z"}));
  EXPECT_EQ(Values(ws.Blob("z")), Values(ws.Blob("x1")));
}

TEST(ElementwiseOps, SumInPlaceAccumulates) {
  Workspace ws;
  // Large enough that oneDNN splits the work across threads.
  Tensor a = RandomTensor({300, 700}, 1), b = RandomTensor({300, 700}, 2);
  Feed(&ws, "a", a);
  Feed(&ws, "b", b);
  RunOp(&ws, MakeOperatorDef("Sum", {"a", "b"}, {"a"}));
  Tensor expected(a.shape(), DataType::kFloat);
  for (int64_t i = 0; i < a.numel(); ++i) expected.data<float>()[i] = a.data<float>()[i] + b.data<float>()[i];
  ExpectNear(ws.Blob("a"), expected, 1e-6f);
}

TEST(ElementwiseOps, SumRejectsOtherInPlace) {
  Workspace ws;
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("Sum", {"a", "b"}, {"b"})), InvalidInput);
}

TEST(ElementwiseOps, SumRejectsMismatchedShapes) {
  Workspace ws;
  Feed(&ws, "a", RandomTensor({2, 3}, 1));
  Feed(&ws, "b", RandomTensor({3, 2}, 2));
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("Sum", {"a", "b"}, {"c"})), InvalidInput);
}

TEST(ElementwiseOps, SumGradient) {
  CheckGradient(
      MakeOperatorDef("Sum", {"x0", "x1", "x2"}, {"y"}),
      {{"x0", RandomTensor({3, 2}, 1)}, {"x1", RandomTensor({3, 2}, 2)}, {"x2", RandomTensor({3, 2}, 3)}});
}

TEST(ElementwiseOps, ScaleValuesAndInPlace) {
  Workspace ws;
  Feed(&ws, "x", TensorFromValues({4}, {1.f, -2.f, 0.5f, 0.f}));
  RunOp(&ws, MakeOperatorDef("Scale", {"x"}, {"y"}, {Arg("scale", -3.f)}));
  EXPECT_EQ(Values(ws.Blob("y")), (std::vector<float>{-3.f, 6.f, -1.5f, 0.f}));
  RunOp(&ws, MakeOperatorDef("Scale", {"x"}, {"x"}, {Arg("scale", 2.f)}));
  EXPECT_EQ(Values(ws.Blob("x")), (std::vector<float>{2.f, -4.f, 1.f, 0.f}));
  RunOp(&ws, MakeOperatorDef("Scale", {"x"}, {"copy"}));
  EXPECT_EQ(Values(ws.Blob("copy")), Values(ws.Blob("x")));
}

// oneDNN takes ranks 1 to 5; other ranks are computed as flat vectors.
TEST(ElementwiseOps, ScalarsAndRankSix) {
  Workspace ws;
  Feed(&ws, "s", TensorFromValues({}, {2.f}));
  Feed(&ws, "t", TensorFromValues({}, {5.f}));
  RunOp(&ws, MakeOperatorDef("Add", {"s", "t"}, {"u"}));
  RunOp(&ws, MakeOperatorDef("Sum", {"u", "s"}, {"u"}));
  RunOp(&ws, MakeOperatorDef("Scale", {"u"}, {"v"}, {Arg("scale", 2.f)}));
  EXPECT_EQ(ws.Blob("v").shape(), Shape{});
  EXPECT_EQ(Values(ws.Blob("v")), std::vector<float>{18.f});
  Feed(&ws, "x", TensorFromValues({1, 2, 1, 2, 1, 1}, {1.f, 2.f, 3.f, 4.f}));
  RunOp(&ws, MakeOperatorDef("Add", {"x", "x"}, {"y"}));
  RunOp(&ws, MakeOperatorDef("Scale", {"y"}, {"y"}, {Arg("scale", 0.5f)}));
  EXPECT_EQ(ws.Blob("y").shape(), (Shape{1, 2, 1, 2, 1, 1}));
  EXPECT_EQ(Values(ws.Blob("y")), (std::vector<float>{1.f, 2.f, 3.f, 4.f}));
}

TEST(ElementwiseOps, ScaleGradient) {
  CheckGradient(MakeOperatorDef("Scale", {"x"}, {"y"}, {Arg("scale", 0.25f)}),
                {{"x", RandomTensor({2, 5}, 1)}});
}

TEST(ElementwiseOps, SumReduceLikeSumsLeadingDims) {
  Workspace ws;
  Tensor dy = RandomTensor({4, 2, 3}, 1);
  Feed(&ws, "dy", dy);
  Feed(&ws, "b", RandomTensor({2, 3}, 2));
  RunOp(&ws, MakeOperatorDef("SumReduceLike", {"dy", "b"}, {"db"}));
  Tensor expected({2, 3}, DataType::kFloat);
  expected.Zero();
  for (int64_t i = 0; i < dy.numel(); ++i) expected.data<float>()[i % 6] += dy.data<float>()[i];
  ExpectNear(ws.Blob("db"), expected, 1e-5f);
}

TEST(ElementwiseOps, AddKeepsItsFirstInputsLayout) {
  for (const char* c : {"c", "a", "b"}) {  // C in place over A or B as well
    auto add = MakeOperatorDef("Add", {"a", "b"}, {c});
    for (auto blocked : std::vector<std::vector<std::string>>{{"a"}, {"b"}, {"a", "b"}})
      ExpectBlockedMatchesPlain(add, blocked);
  }
}

// Sum takes the channel-blocked layout when any input has it, so that its reader (a ReLU's or a convolution's
// gradient) needs no reorder; in place over x0 too.
TEST(ElementwiseOps, SumOfMixedLayoutsIsChannelBlocked) {
  for (const char* y : {"y", "x0"}) {
    auto sum = MakeOperatorDef("Sum", {"x0", "x1", "x2"}, {y});
    for (auto blocked :
         std::vector<std::vector<std::string>>{{}, {"x0"}, {"x0", "x2"}, {"x1"}, {"x2"}, {"x0", "x1", "x2"}})
      ExpectBlockedMatchesPlain(sum, blocked, /*any_blocked_input=*/true);
  }
}

TEST(ElementwiseOps, ScaleKeepsItsInputsLayout) {
  for (const char* y : {"y", "x"})
    ExpectBlockedMatchesPlain(MakeOperatorDef("Scale", {"x"}, {y}, {Arg("scale", -1.5f)}), {"x"});
}

TEST(ElementwiseOps, BroadcastAddOfBlockedInputIsPlain) {
  Workspace plain, blocked;
  Tensor a = RandomTensor(kBlockedShape, 1), b = RandomTensor({3, 5}, 2);
  Feed(&plain, "a", a);
  Feed(&blocked, "a", Blocked(a));
  for (Workspace* ws : {&plain, &blocked}) {
    Feed(ws, "b", b);
    RunOp(ws, MakeOperatorDef("Add", {"a", "b"}, {"a"}, {Arg("broadcast", 1)}));
  }
  EXPECT_TRUE(blocked.Blob("a").is_plain());
  ExpectNear(blocked.Blob("a"), plain.Blob("a"), 1e-6f);
}

TEST(ElementwiseOps, ShapeInference) {
  NetDef net;
  *net.add_op() = MakeOperatorDef("Add", {"a", "b"}, {"c"}, {Arg("broadcast", 1)});
  *net.add_op() = MakeOperatorDef("Sum", {"c", "a"}, {"d"});
  *net.add_op() = MakeOperatorDef("Scale", {"d"}, {"e"});
  auto shapes = InferNetShapes(net, {{"a", {{2, 3}}}, {"b", {{3}}}});
  EXPECT_EQ(shapes["e"].dims, (Shape{2, 3}));
}

}  // namespace lockstep::testing
