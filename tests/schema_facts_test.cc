// The operator facts that passes read from the schema instead of matching operator types: shape functions,
// cost, 16-bit inputs, GPU options, reading across devices, sums across replicas. An operator that only a
// test registers gets the same treatment as the built-in ones, which shows that no pass knows types by name.
#include "lockstep/core/operator.h"
#include "lockstep/model/layers.h"
#include "lockstep/model/mixed_precision.h"
#include "lockstep/model/optimizer.h"
#include "lockstep/model/zoo.h"
#include "lockstep/parallel/placement.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

// A schema-only operator: y = a * x + b, where only x may be 16-bit (as BN's statistics, a and b are not).
LOCKSTEP_OPERATOR_SCHEMA(TestAffine)
    .SetDoc("y = a * x + b (a test's operator)")
    .Input(0, "x", "any shape")
    .Input(1, "a", "x's shape")
    .Input(2, "b", "x's shape")
    .Output(0, "y", "x's shape")
    .IdentityShape()
    .LowPrecisionInputs({0});

TEST(SchemaFacts, EveryOperatorHasAShapeFunction) {
  const std::set<std::string> excluded = {
      "ReadBatch",     // its outputs are what its reader hands out: the net's inputs, given to InferNetShapes
      "RecordThread",  // registered by tests/data_parallel_test.cc, never in a trained net
  };
  for (const auto& type : OperatorRegistry::Types(DeviceType::kCpu)) {
    if (excluded.count(type)) continue;
    const OpSchema* schema = SchemaRegistry::Find(type);
    ASSERT_NE(schema, nullptr) << type << " has no schema";
    EXPECT_TRUE(schema->HasShapeFunction()) << type << " has no shape function";
  }
}

// A whole training step (forward, backward, update) is inferred from the input shapes alone, and every blob a
// run writes has the inferred shape and dtype.
TEST(SchemaFacts, ShapesOfAWholeTrainingStepAreInferredAsARunMakesThem) {
  for (const char* name : {"lenet", "resnet18"}) {
    SCOPED_TRACE(name);
    const bool lenet = std::string(name) == "lenet";
    const ModelConfig config{lenet ? 1 : 3, lenet ? 28 : 32, 10, false};
    ModelHelper model(name);
    std::string logits = BuildModel(name, model, "data", config);
    auto [softmax, loss] = layers::SoftmaxWithLoss(model, logits, "label", "softmax", "loss");
    model.AddGradientOperators({loss});
    AddMomentumSgd(model, SgdOptions{});

    std::map<std::string, TensorShape> shapes = InferNetShapes(model.param_init_net(), {});
    shapes["data"] = {{2, config.num_channels, config.image_size, config.image_size}};
    shapes["label"] = {{2}, DataType::kInt32};
    shapes = InferNetShapes(model.net(), shapes);

    Workspace ws;
    Feed(&ws, "data", RandomTensor(shapes["data"].dims, 3));
    Feed(&ws, "label", Int32Tensor({2}, {1, 7}));
    ws.RunNetOnce(model.param_init_net());
    ws.RunNetOnce(model.net());
    int checked = 0;
    for (const auto& blob : ws.BlobNames()) {
      auto it = shapes.find(blob);
      ASSERT_NE(it, shapes.end()) << blob << " was written but not inferred";
      // A fused BN-ReLU's mask is oneDNN's opaque workspace: its size follows the layout the kernel picks at
      // run time (blocked), the inferred one the plain layout.
      if (it->second.dtype == DataType::kUInt8) continue;
      EXPECT_EQ(ShapeToString(ws.Blob(blob).shape()), ShapeToString(it->second.dims)) << blob;
      EXPECT_EQ(ws.Blob(blob).dtype(), it->second.dtype) << blob;
      ++checked;
    }
    EXPECT_GT(checked, lenet ? 30 : 150);
  }
}

TEST(SchemaFacts, GradientOpShapesFollowTheForwardOps) {
  OperatorDef bn_gradient =
      MakeOperatorDef("SpatialBNGradient", {"x", "scale", "dy", "mean", "inv_std"}, {"dscale", "dbias"},
                      {Arg("gradients", std::vector<int64_t>{1, 2})});
  const TensorShape x{{2, 3, 4, 4}}, channel{{3}};
  auto shapes = SchemaRegistry::Of(bn_gradient).InferShapes(bn_gradient, {x, channel, x, channel, channel});
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_EQ(shapes[0].dims, channel.dims);
  EXPECT_EQ(shapes[1].dims, channel.dims);
  OperatorDef softmax_gradient =
      MakeOperatorDef("SoftmaxWithLossGradient", {"logits", "label", "softmax", "dloss"}, {"dlogits"});
  const TensorShape logits{{8, 10}};
  shapes = SchemaRegistry::Of(softmax_gradient)
               .InferShapes(softmax_gradient, {logits, {{8}, DataType::kInt32}, logits, {{}}});
  EXPECT_EQ(shapes.at(0).dims, logits.dims);
}

TEST(SchemaFacts, CostIsMultiplyAddsForLayersWithWeightsAndElementsWrittenOtherwise) {
  OperatorDef conv = MakeOperatorDef("Conv", {"x", "w"}, {"y"}, {Arg("kernel", 3)});
  // y (2, 8, 6, 6) from w (8, 4, 3, 3): each output element takes 4 * 3 * 3 multiply-adds.
  EXPECT_DOUBLE_EQ(SchemaRegistry::Of(conv).Cost(conv, {{{2, 4, 8, 8}}, {{8, 4, 3, 3}}}, {{{2, 8, 6, 6}}}),
                   2.0 * 8 * 6 * 6 * 36);
  OperatorDef fc = MakeOperatorDef("FC", {"x", "w", "b"}, {"y"});
  EXPECT_DOUBLE_EQ(SchemaRegistry::Of(fc).Cost(fc, {{{5, 20}}, {{10, 20}}, {{10}}}, {{{5, 10}}}),
                   5.0 * 10 * 20);
  OperatorDef relu = MakeOperatorDef("Relu", {"x"}, {"y"});
  EXPECT_DOUBLE_EQ(SchemaRegistry::Of(relu).Cost(relu, {{{5, 20}}}, {{{5, 20}}}), 100.0);
}

TEST(SchemaFacts, GpuOptionsGoToTheOpsWhoseSchemasTakeThem) {
  NetDef net;
  *net.add_op() = MakeOperatorDef("Conv", {"x", "w"}, {"y"});
  *net.add_op() = MakeOperatorDef("ConvGradient", {"x", "w", "dy"}, {"dw"});
  *net.add_op() = MakeOperatorDef("FC", {"a", "w2", "b2"}, {"z"});
  *net.add_op() = MakeOperatorDef("Relu", {"z"}, {"z"});
  GpuOptions options;
  options.cudnn_workspace_bytes = 1 << 20;
  options.enable_tensor_core = true;
  SetGpuOptions(options, &net);
  for (int i : {0, 1}) {
    EXPECT_EQ(GetIntArgument(net.op(i), kCudnnWorkspaceArg, -1), 1 << 20) << DescribeOperator(net.op(i));
    EXPECT_EQ(GetIntArgument(net.op(i), kTensorCoreArg, -1), 1);
    EXPECT_EQ(GetIntArgument(net.op(i), kFloat16ComputeArg, -1), 0);
  }
  EXPECT_EQ(GetIntArgument(net.op(2), kCudnnWorkspaceArg, -1), -1) << "cuBLAS takes no workspace limit";
  EXPECT_EQ(GetIntArgument(net.op(2), kTensorCoreArg, -1), 1);
  EXPECT_EQ(net.op(3).arg_size(), 0) << "Relu takes no GPU option";
}

TEST(SchemaFacts, MixedPrecisionCastsOnlyTheInputsTheSchemaAllows) {
  ModelHelper model("affine");
  model.CreateParam("a", {4}, FillSpec::Constant(2), ParamTag::kWeight);
  model.CreateParam("b", {4}, FillSpec::Constant(1), ParamTag::kBias);
  model.AddOp("ConstantFill", {}, {"x"}, {Arg("shape", std::vector<int64_t>{4})});
  model.AddOp("TestAffine", {"x", "a", "b"}, {"y"});
  model.AddOp("TestAffine", {"y", "a", "b"}, {"z"});
  ComputeInLowPrecision(model, 1, "x", "z", DataType::kFloat16);
  int affines = 0;
  for (const auto& op : model.net().op()) {
    if (op.type() != "TestAffine") continue;
    ++affines;
    EXPECT_EQ(op.input(1), "a") << "a stays float32";
    EXPECT_EQ(op.input(2), "b") << "b stays float32";
  }
  EXPECT_EQ(affines, 2);
  EXPECT_EQ(model.net().op(1).type(), "Cast");
  EXPECT_EQ(model.net().op(1).output(0), "x_fp16");
}

TEST(SchemaFacts, CopiesAndCollectivesReadFromAnyDevice) {
  for (const char* type : {"Copy", "Allreduce", "Broadcast"})
    EXPECT_TRUE(SchemaRegistry::Find(type)->reads_any_device()) << type;
  for (const char* type : {"Relu", "Conv", "Sum"})
    EXPECT_FALSE(SchemaRegistry::Find(type)->reads_any_device()) << type;
}

TEST(SchemaFacts, TheBackwardPassFindsItsSeedAndSumByRole) {
  EXPECT_EQ(SchemaRegistry::TypeFor(OpRole::kGradientSeed), "ConstantFill");
  EXPECT_EQ(SchemaRegistry::TypeFor(OpRole::kGradientSum), "Sum");
}

}  // namespace
}  // namespace lockstep::testing
