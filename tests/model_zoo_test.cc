// Model zoo: parameter shapes and counts against the published architectures, output shapes by inference.
#include <functional>

#include "lockstep/model/layers.h"
#include "lockstep/model/zoo.h"
#include "test_util.h"

namespace lockstep::testing {

namespace {
int64_t CountTrainable(const ModelHelper& model) {
  int64_t total = 0;
  for (const auto& name : model.GetTrainableParams()) total += NumElements(model.Param(name).shape);
  return total;
}

Shape LogitsShape(const std::string& name, const ModelConfig& config, int64_t batch) {
  ModelHelper model(name);
  std::string logits = BuildModel(name, model, "data", config);
  auto shapes = InferNetShapes(model.param_init_net(), {});
  shapes["data"] = {{batch, config.num_channels, config.image_size, config.image_size}};
  shapes = InferNetShapes(model.net(), shapes);
  for (const auto& param : model.params()) EXPECT_TRUE(shapes.count(param.name)) << param.name;
  return shapes.at(logits).dims;
}
}  // namespace

TEST(ModelZoo, LeNetIsTheD2lNetwork) {
  ModelHelper model("lenet");
  ModelConfig config{1, 28, 10, false};
  BuildModel("lenet", model, "data", config);
  std::vector<std::pair<std::string, Shape>> expected = {
      {"conv1_w", {20, 1, 3, 3}}, {"conv1_b", {20}}, {"conv2_w", {50, 20, 5, 5}}, {"conv2_b", {50}},
      {"fc3_w", {128, 800}},      {"fc3_b", {128}},  {"fc4_w", {10, 128}},        {"fc4_b", {10}}};
  ASSERT_EQ(model.params().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(model.params()[i].name, expected[i].first);
    EXPECT_EQ(model.params()[i].shape, expected[i].second);
  }
  // Weights N(0, 0.01), biases zero, as in the d2l chapter.
  for (const auto& op : model.param_init_net().op()) {
    bool bias = op.output(0).back() == 'b';
    EXPECT_EQ(op.type(), bias ? "ConstantFill" : "GaussianFill") << op.output(0);
    if (!bias) EXPECT_FLOAT_EQ(GetFloatArgument(op, "std", 0), 0.01f);
  }
  EXPECT_EQ(LogitsShape("lenet", config, 3), (Shape{3, 10}));
  // The smallest image its two valid convolutions and pools leave a pixel of: 14.
  EXPECT_EQ(LogitsShape("lenet", {1, 14, 10, false}, 2), (Shape{2, 10}));
  ModelHelper too_small("lenet13");
  try {
    BuildModel("lenet", too_small, "data", {1, 13, 10, false});
    ADD_FAILURE() << "lenet built for 13x13 images";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "lenet needs --image_size of at least 14, got 13");
  }
}

TEST(ModelZoo, ResNetParameterCountsMatchTheReference) {
  // torchvision's resnet18 / resnet50 have exactly these many trainable parameters.
  for (auto [name, count] : {std::pair<const char*, int64_t>{"resnet18", 11689512}, {"resnet50", 25557032}}) {
    ModelHelper model(name);
    BuildModel(name, model, "data", ModelConfig{3, 224, 1000, false});
    EXPECT_EQ(CountTrainable(model), count) << name;
  }
  EXPECT_EQ(LogitsShape("resnet50", ModelConfig{3, 64, 7, false}, 2), (Shape{2, 7}));
  EXPECT_EQ(LogitsShape("resnet34", ModelConfig{3, 32, 5, true}, 1), (Shape{1, 5}));
}

TEST(ModelZoo, LayersOfNoChannelsAreRefused) {
  ModelHelper model("empty_layers");
  EXPECT_THROW(layers::Conv(model, "data", "conv", 3, 0, 3, {}), InvalidInput);
  EXPECT_THROW(layers::Conv(model, "data", "conv", 3, 8, 0, {}), InvalidInput);
  EXPECT_THROW(layers::FC(model, "data", "fc", 0, 10, FillSpec::Xavier(), FillSpec::Constant(0)),
               InvalidInput);
  EXPECT_TRUE(model.params().empty());
}

TEST(ModelZoo, LayersTakeWindowsThatAreNotSquare) {
  ModelHelper model("sides");
  layers::ConvOptions conv;
  conv.pad = 1;
  conv.sides = {Arg("kernel_h", 1), Arg("kernel_w", 7), Arg("pad_t", 0),
                Arg("pad_l", 3),    Arg("pad_b", 0),    Arg("pad_r", 3)};
  std::string y = layers::Conv(model, "data", "conv", 2, 4, 3, conv);
  EXPECT_EQ(model.Param("conv_w").shape, (Shape{4, 2, 1, 7}));
  std::string p = layers::MaxPool(model, y, "pool", 2, 2, 0, {Arg("kernel_h", 1), Arg("kernel_w", 2)});
  // Each role is spelled once: the square kernel and pad give way to the sides that spell them.
  std::vector<std::string> names;
  for (const auto& arg : model.net().op(0).arg()) names.push_back(arg.name());
  EXPECT_EQ(names, (std::vector<std::string>{"stride", "dilation", "kernel_h", "kernel_w", "pad_t", "pad_l",
                                             "pad_b", "pad_r", "group"}));
  auto shapes = InferNetShapes(model.param_init_net(), {});
  shapes["data"] = {{3, 2, 5, 9}};
  shapes = InferNetShapes(model.net(), shapes);
  EXPECT_EQ(shapes.at(y).dims, (Shape{3, 4, 5, 9}));
  EXPECT_EQ(shapes.at(p).dims, (Shape{3, 4, 3, 4}));  // a 1x2 window with strides 2x2

  // A window the operator would refuse is refused where the layer is built, before its parameters.
  auto refusal = [](const std::function<void()>& build) -> std::string {
    try {
      build();
    } catch (const InvalidInput& e) {
      return e.what();
    }
    return "built";
  };
  layers::ConvOptions half;
  half.sides = {Arg("stride_h", 2)};
  EXPECT_EQ(refusal([&] { layers::Conv(model, "data", "half", 2, 4, 3, half); }),
            "Conv(data, half_w) -> half: 'stride_h' and 'stride_w' must be given together");
  EXPECT_EQ(model.params().size(), 2u);
  layers::ConvOptions other;
  other.sides = {Arg("group", 2)};
  EXPECT_EQ(refusal([&] { layers::Conv(model, "data", "other", 2, 4, 3, other); }),
            "conv 'other': 'group' is not a per-side window argument (kernel_h/kernel_w, stride_h/stride_w, "
            "pad_t/pad_l/pad_b/pad_r, dilation_h/dilation_w, or kernels, strides, pads, dilations)");
  EXPECT_EQ(refusal([&] {
              layers::AveragePool(model, y, "bad_pool", 3, 1, 0, {Arg("pads", std::vector<int>{1, 1})});
            }),
            "AveragePool(conv) -> bad_pool: 'pads' needs 4 values (t, l, b, r) for 2-D inputs, got 2");
  EXPECT_EQ(model.net().op_size(), 2);
}

TEST(ModelZoo, WideResNet) {
  ModelHelper model("wrn");
  BuildModel("wrn-16-2", model, "data", ModelConfig{3, 32, 10, false});
  EXPECT_EQ(model.Param("wrn4_1_conv2_w").shape, (Shape{128, 128, 3, 3}));
  EXPECT_EQ(LogitsShape("wrn-10-1", ModelConfig{3, 32, 10, false}, 2), (Shape{2, 10}));
  ModelHelper bad("bad");
  EXPECT_THROW(BuildModel("wrn-27-10", bad, "data", ModelConfig{}), InvalidInput);
  EXPECT_THROW(BuildModel("vgg16", bad, "data", ModelConfig{}), InvalidInput);
  // The numbers are written plainly, and bounded: a name that wraps around int, or one with a sign, a
  // leading zero or a space, names no model (it trained WRN-16-1 for wrn-4294967312-1).
  for (const char* name : {"wrn-4294967312-1", "wrn-16-4294967297", "wrn-016-1", "wrn-+16-1", "wrn- 16-1"})
    EXPECT_FALSE(IsKnownModel(name)) << name;
  EXPECT_TRUE(IsKnownModel("wrn-1006-1"));
  try {
    BuildModel("wrn-1006-1", bad, "data", ModelConfig{});
    ADD_FAILURE() << "wrn-1006-1 is deeper than 1000";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(
        e.what(),
        "wrn-1006-1: depth must be 6n+4 from 10 to 1000 (10, 16, 22, 28, 40, ...) and width from 1 to 64");
  }
}

}  // namespace lockstep::testing
