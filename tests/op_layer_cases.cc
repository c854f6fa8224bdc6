// The layer cases of the cross-backend operator table (Conv, FC, pooling, batch normalization) and the
// finite-difference gradient cases of the trainable layers.
#include <cmath>
#include <string>
#include <vector>

#include "op_case_table.h"

namespace lockstep::testing {
namespace {

// A window sweep over (N, C, H, W): Conv's geometry, or a pooling's with the kernel given.
struct Window {
  int64_t kernel_h = 0, kernel_w = 0;  // pooling only; Conv takes its kernel from the filter
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation = 1;

  // The arguments in Caffe2's spellings, the single-value ones where both axes agree.
  std::vector<Arg> Args() const {
    std::vector<Arg> args;
    if (kernel_h == kernel_w && kernel_h > 0) args.emplace_back("kernel", kernel_h);
    if (kernel_h != kernel_w) args.insert(args.end(), {Arg("kernel_h", kernel_h), Arg("kernel_w", kernel_w)});
    if (stride_h == stride_w && stride_h != 1) args.emplace_back("stride", stride_h);
    if (stride_h != stride_w) args.insert(args.end(), {Arg("stride_h", stride_h), Arg("stride_w", stride_w)});
    if (pad_h == pad_w && pad_h != 0) args.emplace_back("pad", pad_h);
    if (pad_h != pad_w)
      args.insert(args.end(),
                  {Arg("pad_t", pad_h), Arg("pad_b", pad_h), Arg("pad_l", pad_w), Arg("pad_r", pad_w)});
    if (dilation != 1) args.emplace_back("dilation", dilation);
    return args;
  }
  // (N, channels, OH, OW) for an x of (N, C, H, W) and a kh x kw kernel.
  Shape Output(const Shape& x, int64_t channels, int64_t kh, int64_t kw) const {
    return {x[0], channels, Swept(x[2], dilation * (kh - 1) + 1, stride_h, pad_h),
            Swept(x[3], dilation * (kw - 1) + 1, stride_w, pad_w)};
  }
};

std::vector<Arg> With(std::vector<Arg> args, const std::vector<Arg>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

}  // namespace

void AddConv(Table& t) {
  struct Geometry {
    std::string name;
    Shape x, w;
    int64_t group;
    Window window;
  };
  const std::vector<Geometry> geometries{
      {"Plain", {2, 3, 7, 7}, {4, 3, 3, 3}, 1, {}},
      {"Pad1", {2, 3, 7, 7}, {4, 3, 3, 3}, 1, {.pad_h = 1, .pad_w = 1}},
      {"Stride2Pad1", {2, 3, 8, 8}, {5, 3, 3, 3}, 1, {.stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1}},
      {"Dilation2", {1, 2, 9, 9}, {3, 2, 3, 3}, 1, {.pad_h = 2, .pad_w = 2, .dilation = 2}},
      {"Groups2", {2, 4, 6, 6}, {6, 2, 3, 3}, 2, {.pad_h = 1, .pad_w = 1}},
      {"Depthwise", {2, 8, 6, 6}, {8, 1, 3, 3}, 8, {.pad_h = 1, .pad_w = 1}},
      {"Kernel1Stride2", {2, 16, 8, 8}, {32, 16, 1, 1}, 1, {.stride_h = 2, .stride_w = 2}},
      // 16 channels and more: oneDNN works in its blocked layouts.
      {"SixteenChannels", {2, 16, 8, 8}, {16, 16, 3, 3}, 1, {.pad_h = 1, .pad_w = 1}},
      {"Rectangular", {1, 3, 6, 9}, {4, 3, 2, 4}, 1, {.stride_h = 1, .stride_w = 2, .pad_h = 1, .pad_w = 0}},
  };
  unsigned seed = 100;
  for (const auto& g : geometries) {
    std::vector<Arg> args = g.window.Args();
    if (g.group != 1) args.emplace_back("group", g.group);
    Shape y = g.window.Output(g.x, g.w[0], g.w[2], g.w[3]);
    Blobs inputs{{"x", RandomTensor(g.x, seed++)},
                 {"w", RandomTensor(g.w, seed++)},
                 {"b", RandomTensor({g.w[0]}, seed++)},
                 {"dy", RandomTensor(y, seed++)}};
    // Twice: the first run of a shape chooses cuDNN's algorithms (timing them in the output buffers), the
    // second reuses the choice.
    t.Add("Conv_" + g.name, MakeOperatorDef("Conv", {"x", "w", "b"}, {"y"}, args), inputs, kMatmul).runs = 2;
    t.Add("ConvGradient_" + g.name,
          MakeOperatorDef("ConvGradient", {"x", "w", "dy"}, {"dw", "db", "dx"}, args), inputs, kMatmul)
        .runs = 2;
    if (g.name == "Plain" || g.name == "Stride2Pad1") {
      t.Add("Conv_" + g.name + "NoBias", MakeOperatorDef("Conv", {"x", "w"}, {"y"}, args), inputs, kMatmul);
      t.Add("ConvGradient_" + g.name + "NoBias",
            MakeOperatorDef("ConvGradient", {"x", "w", "dy"}, {"dw", "dx"}, With(args, {Arg("no_bias", 1)})),
            inputs, kMatmul);
      t.Add("ConvGradient_" + g.name + "OnlyDx",
            MakeOperatorDef("ConvGradient", {"x", "w", "dy"}, {"dx"},
                            With(args, {Arg("no_bias", 1), Arg("no_dweight", 1)})),
            inputs, kMatmul);
      t.Add("ConvGradient_" + g.name + "NoDx",
            MakeOperatorDef("ConvGradient", {"x", "w", "dy"}, {"dw", "db"}, args), inputs, kMatmul);
    }
  }
}

void AddFc(Table& t) {
  struct Geometry {
    std::string name;
    Shape x, w, y;
    std::vector<Arg> args;
  };
  const std::vector<Geometry> geometries{
      {"Plain", {4, 6}, {5, 6}, {4, 5}, {}},
      {"FlattensAtAxis1", {3, 2, 4}, {5, 8}, {3, 5}, {}},
      {"Axis2", {2, 3, 4}, {5, 4}, {2, 3, 5}, {Arg("axis", 2)}},
      {"Large", {32, 128}, {64, 128}, {32, 64}, {}},
  };
  unsigned seed = 200;
  for (const auto& g : geometries) {
    Blobs inputs{{"x", RandomTensor(g.x, seed++)},
                 {"w", RandomTensor(g.w, seed++)},
                 {"b", RandomTensor({g.w[0]}, seed++)},
                 {"dy", RandomTensor(g.y, seed++)}};
    t.Add("FC_" + g.name, MakeOperatorDef("FC", {"x", "w", "b"}, {"y"}, g.args), inputs, kMatmul);
    t.Add("FCGradient_" + g.name, MakeOperatorDef("FCGradient", {"x", "w", "dy"}, {"dw", "db", "dx"}, g.args),
          inputs, kMatmul);
    if (g.name != "Plain") continue;
    t.Add("FCGradient_NoBias",
          MakeOperatorDef("FCGradient", {"x", "w", "dy"}, {"dw", "dx"}, With(g.args, {Arg("no_bias", 1)})),
          inputs, kMatmul);
    t.Add("FCGradient_OnlyDx",
          MakeOperatorDef("FCGradient", {"x", "w", "dy"}, {"dx"},
                          With(g.args, {Arg("no_bias", 1), Arg("no_dweight", 1)})),
          inputs, kMatmul);
    t.Add("FCGradient_OnlyDb",
          MakeOperatorDef("FCGradient", {"x", "w", "dy"}, {"db"}, With(g.args, {Arg("no_dweight", 1)})),
          inputs, kMatmul);
    t.Add("FCGradient_NoDx", MakeOperatorDef("FCGradient", {"x", "w", "dy"}, {"dw", "db"}, g.args), inputs,
          kMatmul);
  }
}

// Max pooling reads distinct values, so that both backends find the same maximum. cuDNN pads opposite sides
// equally, so every case does.
void AddPooling(Table& t) {
  struct Geometry {
    std::string name;
    std::string type;
    Shape x;
    Window window;
    std::vector<Arg> extra;
  };
  const std::vector<Geometry> geometries{
      {"Kernel2Stride2",
       "MaxPool",
       {2, 3, 8, 8},
       {.kernel_h = 2, .kernel_w = 2, .stride_h = 2, .stride_w = 2},
       {}},
      {"Kernel3Stride2Pad1",
       "MaxPool",
       {2, 16, 9, 9},
       {.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1},
       {}},
      {"Rectangular",
       "MaxPool",
       {1, 2, 7, 6},
       {.kernel_h = 3, .kernel_w = 2, .stride_h = 1, .stride_w = 2},
       {}},
      {"Kernel3Pad1",
       "AveragePool",
       {2, 3, 6, 6},
       {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1},
       {}},
      {"CountIncludePad",
       "AveragePool",
       {2, 3, 7, 7},
       {.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1},
       {Arg("count_include_pad", 1)}},
      {"Kernel2Stride2SixteenChannels",
       "AveragePool",
       {2, 16, 8, 8},
       {.kernel_h = 2, .kernel_w = 2, .stride_h = 2, .stride_w = 2},
       {}},
      {"Global", "MaxPool", {2, 5, 7, 7}, {.kernel_h = 7, .kernel_w = 7}, {Arg("global_pooling", 1)}},
      {"Global", "AveragePool", {2, 5, 7, 7}, {.kernel_h = 7, .kernel_w = 7}, {Arg("global_pooling", 1)}},
  };
  unsigned seed = 300;
  for (const auto& g : geometries) {
    bool global = !g.extra.empty() && g.extra[0].proto.name() == "global_pooling";
    std::vector<Arg> args = With(global ? std::vector<Arg>{} : g.window.Args(), g.extra);
    Shape y = g.window.Output(g.x, g.x[1], g.window.kernel_h, g.window.kernel_w);
    Blobs inputs{{"x", g.type == "MaxPool" ? Distinct(g.x, seed++) : RandomTensor(g.x, seed++)},
                 {"dy", RandomTensor(y, seed++)}};
    t.Add(g.type + "_" + g.name, MakeOperatorDef(g.type, {"x"}, {"y"}, args), inputs,
          g.type == "MaxPool" ? kExact : kReduction);
    OpCase& gradient =
        t.Add(g.type + "Gradient_" + g.name,
              MakeOperatorDef(g.type + "Gradient", {"x", "y", "dy"}, {"dx"}, args), inputs, kReduction);
    gradient.setup = {MakeOperatorDef(g.type, {"x"}, {"y"}, args)};
  }
}

namespace {

// SpatialBN's inputs for an x of (N, C, ...): positive running variances, scales away from 0.
Blobs BatchNormInputs(const Shape& x, unsigned seed) {
  const int64_t c = x[1];
  return {{"x", RandomTensor(x, seed, -2.f, 3.f)},        {"scale", RandomTensor({c}, seed + 1, 0.5f, 1.5f)},
          {"bias", RandomTensor({c}, seed + 2)},          {"rm", RandomTensor({c}, seed + 3)},
          {"rv", RandomTensor({c}, seed + 4, 0.5f, 2.f)}, {"dy", RandomTensor(x, seed + 5)}};
}

OperatorDef TrainingBatchNorm(const std::vector<Arg>& args = {}, bool relu = false) {
  std::vector<std::string> outputs{"y", "rm", "rv", "saved_mean", "saved_var"};
  if (relu) outputs.push_back("mask");
  return MakeOperatorDef("SpatialBN", {"x", "scale", "bias", "rm", "rv"}, outputs,
                         relu ? With(args, {Arg("relu", 1)}) : args);
}

}  // namespace

void AddBatchNorm(Table& t) {
  const std::vector<std::string> statistics{"y", "rm", "rv", "saved_mean", "saved_var"};
  struct Shaped {
    std::string name;
    Shape x;
  };
  const std::vector<Shaped> shapes{{"", {4, 3, 5, 5}}, {"_NC", {8, 6}}, {"_SixteenChannels", {2, 16, 4, 4}}};
  unsigned seed = 400;
  for (const auto& shaped : shapes) {
    Blobs inputs = BatchNormInputs(shaped.x, seed);
    seed += 10;
    // Two steps: the second folds its statistics into running ones the first already moved.
    t.Add("SpatialBN_Training" + shaped.name, TrainingBatchNorm(), inputs, kReduction).runs = 2;
    t.Add("SpatialBN_TestMode" + shaped.name,
          MakeOperatorDef("SpatialBN", {"x", "scale", "bias", "rm", "rv"}, {"y"}, {Arg("is_test", 1)}),
          inputs, kReduction);
    // The ReLU mask's format is each backend's own; Y and the statistics must agree.
    OpCase& fused =
        t.Add("SpatialBN_TrainingRelu" + shaped.name, TrainingBatchNorm({}, true), inputs, kReduction);
    fused.compare = statistics;
    t.Add("SpatialBNGradient_Training" + shaped.name,
          MakeOperatorDef("SpatialBNGradient", {"x", "scale", "dy", "saved_mean", "saved_var"},
                          {"dx", "dscale", "dbias"}),
          inputs, kReduction)
        .setup = {TrainingBatchNorm()};
  }

  const Blobs inputs = BatchNormInputs({4, 3, 5, 5}, 450);
  t.Add("SpatialBN_MomentumAndEpsilon", TrainingBatchNorm({Arg("momentum", 0.5f), Arg("epsilon", 1e-3f)}),
        inputs, kReduction);
  t.Add("SpatialBN_TestModeRelu",
        MakeOperatorDef("SpatialBN", {"x", "scale", "bias", "rm", "rv"}, {"y"},
                        {Arg("is_test", 1), Arg("relu", 1)}),
        inputs, kReduction);
  auto gradient = [&](const std::string& name, const std::vector<std::string>& outputs,
                      const std::vector<Arg>& args, bool relu) {
    std::vector<std::string> in{"x", "scale", "dy", "saved_mean", "saved_var"};
    if (relu) in.push_back("mask");
    t.Add(name, MakeOperatorDef("SpatialBNGradient", in, outputs, args), inputs, kReduction).setup = {
        TrainingBatchNorm({Arg("epsilon", 1e-3f)}, relu)};
  };
  gradient("SpatialBNGradient_OnlyDx", {"dx"}, {Arg("epsilon", 1e-3f), Arg("gradients", Ints{0})}, false);
  gradient("SpatialBNGradient_OnlyDscaleDbias", {"dscale", "dbias"},
           {Arg("epsilon", 1e-3f), Arg("gradients", Ints{1, 2})}, false);
  gradient("SpatialBNGradient_Relu", {"dx", "dscale", "dbias"}, {Arg("epsilon", 1e-3f), Arg("relu", 1)},
           true);
  t.Add("SpatialBNGradient_TestMode",
        MakeOperatorDef("SpatialBNGradient", {"x", "scale", "dy", "rm", "rv"}, {"dx", "dscale", "dbias"},
                        {Arg("is_test", 1)}),
        inputs, kReduction);

  // Statistics combined over two replicas: ChannelStats of each replica's batch, summed, as data parallelism
  // computes them with an Allreduce.
  Blobs combined = inputs;
  combined["x_other"] = RandomTensor({4, 3, 5, 5}, 460, -1.f, 4.f);
  OpCase& c = t.Add("SpatialBN_CombinedStatistics",
                    MakeOperatorDef("SpatialBN", {"x", "scale", "bias", "rm", "rv", "sum", "sum_sq"},
                                    statistics, {Arg("num_batches", 2)}),
                    combined, kReduction);
  c.setup = {MakeOperatorDef("ChannelStats", {"x"}, {"sum_0", "sum_sq_0"}),
             MakeOperatorDef("ChannelStats", {"x_other"}, {"sum_1", "sum_sq_1"}),
             MakeOperatorDef("Sum", {"sum_0", "sum_1"}, {"sum"}),
             MakeOperatorDef("Sum", {"sum_sq_0", "sum_sq_1"}, {"sum_sq"})};

  for (const auto& shaped : shapes) {
    const int64_t channels = shaped.x[1];
    Blobs stats{{"x", RandomTensor(shaped.x, seed, -2.f, 3.f)},
                {"scale", RandomTensor({channels}, seed + 1, 0.5f, 1.5f)},
                {"mean", RandomTensor({channels}, seed + 2)},
                {"var", RandomTensor({channels}, seed + 3, 0.5f, 2.f)},
                {"dy", RandomTensor(shaped.x, seed + 4)},
                {"dscale_all", RandomTensor({channels}, seed + 5, -4.f, 4.f)},
                {"dbias_all", RandomTensor({channels}, seed + 6, -4.f, 4.f)}};
    seed += 10;
    t.Add("ChannelStats" + shaped.name, MakeOperatorDef("ChannelStats", {"x"}, {"sum", "sum_sq"}), stats,
          kReduction);
    t.Add("ChannelBackpropStats" + shaped.name,
          MakeOperatorDef("ChannelBackpropStats", {"x", "mean", "var", "dy"}, {"dscale", "dbias"},
                          {Arg("epsilon", 1e-4f)}),
          stats, kReduction);
    t.Add("SpatialBNCombinedGradient" + shaped.name,
          MakeOperatorDef("SpatialBNCombinedGradient",
                          {"x", "scale", "dy", "mean", "var", "dscale_all", "dbias_all"}, {"dx"},
                          {Arg("num_batches", 2)}),
          stats, kReduction);
  }
}

// Inputs kept away from kinks (Relu at 0, a max pooling's ties) by more than the finite-difference step.
std::vector<GradientCase> GradientCases() {
  std::vector<GradientCase> cases;
  auto add = [&](const std::string& name, const OperatorDef& op, Blobs inputs,
                 GradientCheckOptions options = {}) {
    cases.push_back({name, op, std::move(inputs), options});
  };
  add("Conv", MakeOperatorDef("Conv", {"x", "w", "b"}, {"y"}, {Arg("pad", 1)}),
      {{"x", RandomTensor({2, 3, 5, 5}, 500)},
       {"w", RandomTensor({4, 3, 3, 3}, 501)},
       {"b", RandomTensor({4}, 502)}});
  add("Conv_Stride2Dilation2Groups2",
      MakeOperatorDef("Conv", {"x", "w"}, {"y"},
                      {Arg("stride", 2), Arg("dilation", 2), Arg("pad", 2), Arg("group", 2)}),
      {{"x", RandomTensor({1, 4, 7, 7}, 503)}, {"w", RandomTensor({4, 2, 3, 3}, 504)}});
  add("FC", MakeOperatorDef("FC", {"x", "w", "b"}, {"y"}),
      {{"x", RandomTensor({3, 5}, 510)}, {"w", RandomTensor({4, 5}, 511)}, {"b", RandomTensor({4}, 512)}});

  Tensor relu_x = RandomTensor({2, 3, 4, 5}, 520, 0.1f, 1.f);
  for (int64_t i = 0; i < relu_x.numel(); i += 2) relu_x.data<float>()[i] *= -1;
  add("Relu", MakeOperatorDef("Relu", {"x"}, {"y"}), {{"x", relu_x}});
  add("MaxPool",
      MakeOperatorDef("MaxPool", {"x"}, {"y"}, {Arg("kernel", 3), Arg("stride", 2), Arg("pad", 1)}),
      {{"x", Distinct({1, 2, 7, 7}, 530)}});
  add("AveragePool", MakeOperatorDef("AveragePool", {"x"}, {"y"}, {Arg("kernel", 3), Arg("pad", 1)}),
      {{"x", RandomTensor({1, 2, 5, 5}, 531)}});
  add("AveragePool_Global", MakeOperatorDef("AveragePool", {"x"}, {"y"}, {Arg("global_pooling", 1)}),
      {{"x", RandomTensor({2, 3, 4, 4}, 532)}});

  GradientCheckOptions loss_only;
  loss_only.inputs_to_check = {0};
  loss_only.outputs_with_grad = {1};
  add("SoftmaxWithLoss",
      MakeOperatorDef("SoftmaxWithLoss", {"logits", "labels"}, {"softmax", "loss"}, {Arg("scale", 2.f)}),
      {{"logits", RandomTensor({3, 4}, 540, -2.f, 2.f)}, {"labels", Int32Tensor({3}, {3, 0, 1})}}, loss_only);

  // The running statistics are updated in place, so only X, scale and bias are perturbed.
  GradientCheckOptions batch_norm;
  batch_norm.inputs_to_check = {0, 1, 2};
  batch_norm.step = 1e-3f;
  Blobs bn = BatchNormInputs({2, 3, 2, 2}, 550);
  bn.erase("dy");
  add("SpatialBN_Training", TrainingBatchNorm(), bn, batch_norm);
  add("SpatialBN_TestMode",
      MakeOperatorDef("SpatialBN", {"x", "scale", "bias", "rm", "rv"}, {"y"}, {Arg("is_test", 1)}), bn,
      batch_norm);
  return cases;
}

}  // namespace lockstep::testing
