// Batch normalization with statistics combined across replicas: ChannelStats and ChannelBackpropStats against
// reference loops, and the whole data-parallel pipeline (with the Allreduce simulated by summing the
// replicas' blobs) against a single SpatialBN and its gradient over the whole batch.
#include <cmath>

#include "lockstep/ops/batch_norm_channels.h"
#include "lockstep/ops/dnnl_utils.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

// Per channel c, the sum over N and the spatial dims of f(j, c) for the row-major index j of each element of
// c in a tensor of shape x, which is (N, C, ...).
template <typename F>
std::vector<float> ReferenceChannelSums(const Shape& x, F f) {
  int64_t n = x[0], c = x[1], hw = NumElements(x) / (n * c);
  std::vector<float> sums(c);
  for (int64_t ch = 0; ch < c; ++ch) {
    double total = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < hw; ++k) total += f((i * c + ch) * hw + k, ch);
    sums[ch] = static_cast<float>(total);
  }
  return sums;
}

// Samples [begin, end) of x, which is (N, ...) and plain.
Tensor Samples(const Tensor& x, int64_t begin, int64_t end) {
  Shape shape = x.shape();
  int64_t per_sample = x.numel() / shape[0];
  shape[0] = end - begin;
  std::vector<float> values(x.data<float>() + begin * per_sample, x.data<float>() + end * per_sample);
  return TensorFromValues(shape, values);
}

// What the data-parallel Allreduce does: every replica's `name + "_combined"` gets the sum of `name` over
// the replicas.
void SimulateAllreduce(std::vector<Workspace>& replicas, const std::string& name) {
  Tensor total = Plain(replicas[0].Blob(name));
  for (size_t r = 1; r < replicas.size(); ++r) {
    Tensor part = Plain(replicas[r].Blob(name));
    for (int64_t i = 0; i < total.numel(); ++i) total.data<float>()[i] += part.data<float>()[i];
  }
  for (Workspace& ws : replicas) Feed(&ws, name + "_combined", total);
}

OperatorDef CombinedBN(int64_t num_batches) {
  return MakeOperatorDef("SpatialBN", {"x", "scale", "bias", "rm", "rv", "s_combined", "q_combined"},
                         {"y", "rm", "rv", "saved_mean", "saved_var"},
                         {Arg("momentum", 0.8f), Arg("epsilon", 1e-5f), Arg("num_batches", num_batches)});
}

void FeedParameters(Workspace* ws, int64_t channels) {
  Feed(ws, "scale", RandomTensor({channels}, 2, 0.5f, 1.5f));
  Feed(ws, "bias", RandomTensor({channels}, 3));
  Feed(ws, "rm", RandomTensor({channels}, 4));
  Feed(ws, "rv", RandomTensor({channels}, 5, 0.5f, 2.f));
}

// x is (N, C, H, W) and plain; returns it in the oneDNN layout `tag`.
Tensor InLayout(const Tensor& x, dnnl::memory::format_tag tag) {
  dnnl::memory::desc desc(ToDims(x.shape()), dnnl::memory::data_type::f32, tag);
  Tensor converted;
  dnnl::memory to = ResizeForDesc(&converted, x.shape(), desc);
  dnnl::memory from = ToMemory(x);
  Execute(dnnl::reorder(from, to), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
  return converted;
}

// The gradient ops SpatialBN's maker emits for dX, dscale and dbias from dY "y_grad".
std::vector<OperatorDef> GradientOps(const OperatorDef& forward) {
  std::vector<std::string> input_grads(forward.input_size());
  input_grads[0] = "x_grad";
  input_grads[1] = "scale_grad";
  input_grads[2] = "bias_grad";
  GradientContext context{forward, {"y_grad", "", "", "", ""}, input_grads};
  return (*GradientRegistry::Find("SpatialBN"))(context);
}

}  // namespace

// Channel views address plain, nhwc and channel-blocked tensors where they lie; a layout blocked on N as
// well is read from a plain copy.
TEST(ChannelStatsOp, ChannelViewFindsEveryElement) {
  using tag = dnnl::memory::format_tag;
  Shape shape{2, 20, 3, 4};
  Tensor x = RandomTensor(shape, 1);
  for (tag layout : {tag::nchw, tag::nhwc, tag::nChw16c, tag::nChw8c, tag::ABcd16a16b}) {
    Tensor laid_out = InLayout(x, layout), plain;
    ChannelView view;
    const Tensor& addressable = ChannelAddressable(laid_out, &plain, &view);
    EXPECT_EQ(&addressable == &laid_out, layout != tag::ABcd16a16b);
    ASSERT_EQ(view.spatial, 12);
    const float* data = static_cast<const float*>(addressable.raw_data());
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t c = 0; c < 20; ++c)
        for (int64_t s = 0; s < 12; ++s)
          ASSERT_EQ(data[view.Offset(n, c / view.block, s) + c % view.block],
                    x.data<float>()[(n * 20 + c) * 12 + s])
              << "layout " << static_cast<int>(layout) << " at " << n << ", " << c << ", " << s;
  }
}

TEST(ChannelStatsOp, SumsMatchReferenceInEveryLayout) {
  for (Shape shape : {Shape{4, 3, 5, 2}, Shape{6, 4}, Shape{3, 20, 4, 4}}) {
    for (bool blocked : {false, true}) {
      if (blocked && shape.size() != 4) continue;
      Tensor x = RandomTensor(shape, 1, -2.f, 3.f);
      Workspace ws;
      Feed(&ws, "x", blocked ? Blocked(x) : x);
      RunOp(&ws, MakeOperatorDef("ChannelStats", {"x"}, {"s", "q"}));
      const float* data = x.data<float>();
      int64_t c = shape[1];
      ExpectNear(
          ws.Blob("s"),
          TensorFromValues({c}, ReferenceChannelSums(shape, [&](int64_t j, int64_t) { return data[j]; })),
          1e-5f);
      ExpectNear(ws.Blob("q"),
                 TensorFromValues({c}, ReferenceChannelSums(shape,
                                                            [&](int64_t j, int64_t) {
                                                              return static_cast<double>(data[j]) * data[j];
                                                            })),
                 1e-5f);
    }
  }
}

TEST(ChannelStatsOp, BackpropSumsMatchReferenceInEveryLayout) {
  const float epsilon = 1e-3f;
  for (Shape shape : {Shape{4, 3, 5, 2}, Shape{6, 4}, Shape{3, 20, 4, 4}}) {
    for (int blocked = 0; blocked < 3; ++blocked) {  // 0: all plain, 1: X blocked, 2: X and dY blocked
      if (blocked && shape.size() != 4) continue;
      int64_t c = shape[1];
      Tensor x = RandomTensor(shape, 1, -2.f, 3.f), dy = RandomTensor(shape, 6);
      Tensor mean = RandomTensor({c}, 7), var = RandomTensor({c}, 8, 0.5f, 2.f);
      Workspace ws;
      Feed(&ws, "x", blocked ? Blocked(x) : x);
      Feed(&ws, "dy", blocked == 2 ? Blocked(dy) : dy);
      Feed(&ws, "mean", mean);
      Feed(&ws, "var", var);
      RunOp(&ws, MakeOperatorDef("ChannelBackpropStats", {"x", "mean", "var", "dy"}, {"dscale", "dbias"},
                                 {Arg("epsilon", epsilon)}));
      const float *xs = x.data<float>(), *dys = dy.data<float>();
      const float *mu = mean.data<float>(), *sigma2 = var.data<float>();
      ExpectNear(ws.Blob("dscale"),
                 TensorFromValues({c}, ReferenceChannelSums(shape,
                                                            [&](int64_t j, int64_t ch) {
                                                              return dys[j] * (xs[j] - mu[ch]) /
                                                                     std::sqrt(sigma2[ch] + epsilon);
                                                            })),
                 1e-5f);
      ExpectNear(
          ws.Blob("dbias"),
          TensorFromValues({c}, ReferenceChannelSums(shape, [&](int64_t j, int64_t) { return dys[j]; })),
          1e-5f);
    }
  }
}

// The data-parallel pipeline on k replicas of N / k samples each reproduces SpatialBN and its gradient on the
// whole batch: every replica's Y and dX slice, the running and saved statistics, and the replicas' dscale and
// dbias summed (what the gradient allreduce computes).
TEST(SpatialBNCombinedStats, ReplicasMatchWholeBatch) {
  struct Case {
    Shape shape;
    int64_t replicas;
    bool blocked;
  };
  for (Case test : {Case{{6, 3, 4, 4}, 1, false}, Case{{6, 3, 4, 4}, 2, false}, Case{{6, 3, 4, 4}, 3, false},
                    Case{{6, 5}, 3, false}, Case{{6, 20, 4, 4}, 2, true}, Case{{6, 20, 4, 4}, 3, true}}) {
    SCOPED_TRACE(ShapeToString(test.shape) + " on " + std::to_string(test.replicas) +
                 (test.blocked ? " replicas, blocked" : " replicas, plain"));
    int64_t n = test.shape[0], c = test.shape[1], k = test.replicas, slice = n / k;
    Tensor x = RandomTensor(test.shape, 1, -2.f, 3.f), dy = RandomTensor(test.shape, 6);

    Workspace whole;
    Feed(&whole, "x", x);
    Feed(&whole, "y_grad", dy);
    FeedParameters(&whole, c);
    auto forward = MakeOperatorDef("SpatialBN", {"x", "scale", "bias", "rm", "rv"},
                                   {"y", "rm", "rv", "saved_mean", "saved_var"},
                                   {Arg("momentum", 0.8f), Arg("epsilon", 1e-5f)});
    RunOp(&whole, forward);
    for (const auto& op : GradientOps(forward)) RunOp(&whole, op);

    std::vector<Workspace> replicas(k);
    for (int64_t r = 0; r < k; ++r) {
      Tensor x_slice = Samples(x, r * slice, (r + 1) * slice),
             dy_slice = Samples(dy, r * slice, (r + 1) * slice);
      Feed(&replicas[r], "x", test.blocked ? Blocked(x_slice) : x_slice);
      Feed(&replicas[r], "y_grad", test.blocked ? Blocked(dy_slice) : dy_slice);
      FeedParameters(&replicas[r], c);
      RunOp(&replicas[r], MakeOperatorDef("ChannelStats", {"x"}, {"s", "q"}));
    }
    SimulateAllreduce(replicas, "s");
    SimulateAllreduce(replicas, "q");
    for (Workspace& ws : replicas) RunOp(&ws, CombinedBN(k));

    auto backward = GradientOps(CombinedBN(k));
    ASSERT_EQ(backward.size(), 2u);
    for (Workspace& ws : replicas) RunOp(&ws, backward[0]);
    SimulateAllreduce(replicas, "scale_grad");
    SimulateAllreduce(replicas, "bias_grad");
    for (Workspace& ws : replicas) RunOp(&ws, backward[1]);

    const float tolerance = 1e-5f;
    for (int64_t r = 0; r < k; ++r) {
      const Workspace& ws = replicas[r];
      EXPECT_EQ(ws.Blob("y").is_plain(), !test.blocked);
      EXPECT_EQ(ws.Blob("x_grad").is_plain(), !test.blocked);
      ExpectNear(ws.Blob("y"), Samples(Plain(whole.Blob("y")), r * slice, (r + 1) * slice), tolerance);
      ExpectNear(ws.Blob("x_grad"), Samples(Plain(whole.Blob("x_grad")), r * slice, (r + 1) * slice),
                 tolerance);
      for (const char* name : {"rm", "rv", "saved_mean", "saved_var"})
        ExpectNear(ws.Blob(name), whole.Blob(name), tolerance);
      // The combined blobs hold the replicas' sums: the whole batch's gradients of scale and bias.
      ExpectNear(ws.Blob("scale_grad_combined"), whole.Blob("scale_grad"), tolerance);
      ExpectNear(ws.Blob("bias_grad_combined"), whole.Blob("bias_grad"), tolerance);
    }
  }
}

// The backward pass AddGradientOperators builds for the 7-input form: this replica's sums under the parameter
// gradients' names, and dX from their "_combined" sums over the replicas.
TEST(SpatialBNCombinedStats, AddGradientOperatorsEmitsLocalSumsThenCombinedGradient) {
  NetDef net;
  *net.add_op() = MakeOperatorDef("ChannelStats", {"x"}, {"s", "q"});
  *net.add_op() = CombinedBN(4);
  auto gradients = AddGradientOperators(&net, {"y"}, {"x", "scale", "bias"});
  EXPECT_EQ(gradients["scale"], "scale_grad");
  EXPECT_EQ(gradients["bias"], "bias_grad");
  EXPECT_EQ(gradients["x"], "x_grad");
  ASSERT_EQ(net.op_size(), 5);  // ChannelStats, SpatialBN, ConstantFill, ChannelBackpropStats, gradient
  const OperatorDef& stats = net.op(3);
  EXPECT_EQ(stats.type(), "ChannelBackpropStats");
  EXPECT_EQ(std::vector<std::string>(stats.input().begin(), stats.input().end()),
            (std::vector<std::string>{"x", "saved_mean", "saved_var", "y_grad"}));
  EXPECT_EQ(std::vector<std::string>(stats.output().begin(), stats.output().end()),
            (std::vector<std::string>{"scale_grad", "bias_grad"}));
  EXPECT_FLOAT_EQ(GetFloatArgument(stats, "epsilon", 0.f), 1e-5f);
  const OperatorDef& dx = net.op(4);
  EXPECT_EQ(dx.type(), "SpatialBNCombinedGradient");
  EXPECT_EQ(std::vector<std::string>(dx.input().begin(), dx.input().end()),
            (std::vector<std::string>{"x", "scale", "y_grad", "saved_mean", "saved_var",
                                      "scale_grad_combined", "bias_grad_combined"}));
  EXPECT_EQ(std::vector<std::string>(dx.output().begin(), dx.output().end()),
            (std::vector<std::string>{"x_grad"}));
  EXPECT_EQ(GetIntArgument(dx, "num_batches", 0), 4);
  EXPECT_FLOAT_EQ(GetFloatArgument(dx, "epsilon", 0.f), 1e-5f);

  // Without parameter gradients the sums still get blobs, since dX needs them.
  NetDef frozen;
  *frozen.add_op() = CombinedBN(2);
  AddGradientOperators(&frozen, {"y"}, {"x"});
  ASSERT_EQ(frozen.op_size(), 4);
  EXPECT_EQ(frozen.op(2).output(0), "y_grad_dscale");
  EXPECT_EQ(frozen.op(2).output(1), "y_grad_dbias");
  EXPECT_EQ(frozen.op(3).input(5), "y_grad_dscale_combined");
  EXPECT_EQ(frozen.op(3).input(6), "y_grad_dbias_combined");

  // Without dX only the sums are computed: they are the parameter gradients.
  NetDef first_layer;
  *first_layer.add_op() = CombinedBN(2);
  AddGradientOperators(&first_layer, {"y"}, {"scale", "bias"});
  ASSERT_EQ(first_layer.op_size(), 3);
  EXPECT_EQ(first_layer.op(2).type(), "ChannelBackpropStats");
}

// Finite differences through the 7-input op with one replica. The sums of X are inputs of the op, so
// perturbing X alone would not move them: dX is covered by ReplicasMatchWholeBatch, this checks dscale and
// dbias.
TEST(SpatialBNCombinedStats, GradientOfScaleAndBias) {
  Shape shape{2, 3, 2, 2};
  Tensor x = RandomTensor(shape, 11);
  Workspace stats;
  Feed(&stats, "x", x);
  RunOp(&stats, MakeOperatorDef("ChannelStats", {"x"}, {"s", "q"}));
  GradientCheckOptions options;
  options.inputs_to_check = {1, 2};
  options.step = 1e-3f;
  CheckGradient(CombinedBN(1),
                {{"x", x},
                 {"scale", RandomTensor({3}, 12, 0.5f, 1.5f)},
                 {"bias", RandomTensor({3}, 13)},
                 {"rm", RandomTensor({3}, 14)},
                 {"rv", RandomTensor({3}, 15, 0.5f, 2.f)},
                 {"s_combined", stats.Blob("s")},
                 {"q_combined", stats.Blob("q")}},
                options);
}

TEST(SpatialBNCombinedStats, RejectsUnsupportedForms) {
  Workspace ws;
  Feed(&ws, "x", RandomTensor({2, 3, 4, 4}, 1));
  FeedParameters(&ws, 3);
  RunOp(&ws, MakeOperatorDef("ChannelStats", {"x"}, {"s_combined", "q_combined"}));
  auto with_arg = [](Arg arg) {
    auto def = CombinedBN(2);
    SetArgument(&def, arg);
    return def;
  };
  // Parallelize splits a fused ReLU off first; test mode uses the running statistics, not combined ones.
  auto fused = with_arg(Arg("relu", 1));
  fused.add_output("mask");
  EXPECT_THROW(RunOp(&ws, fused), InvalidInput);
  EXPECT_THROW(RunOp(&ws, with_arg(Arg("is_test", 1))), InvalidInput);
  EXPECT_THROW(RunOp(&ws, with_arg(Arg("num_batches", 0))), InvalidInput);
  GradientContext context{fused, {"y_grad", "", "", "", "", ""}, {"x_grad", "", "", "", "", "", ""}};
  EXPECT_THROW((*GradientRegistry::Find("SpatialBN"))(context), InvalidInput);

  auto six_inputs = CombinedBN(2);
  six_inputs.mutable_input()->RemoveLast();
  EXPECT_THROW(RunOp(&ws, six_inputs), InvalidInput);

  Feed(&ws, "q_combined", RandomTensor({4}, 9));
  EXPECT_THROW(RunOp(&ws, CombinedBN(2)), InvalidInput);

  Feed(&ws, "dy", RandomTensor({2, 3, 4, 5}, 10));
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("ChannelBackpropStats", {"x", "scale", "rv", "dy"}, {"ds", "db"})),
               InvalidInput);
  EXPECT_THROW(RunOp(&ws, MakeOperatorDef("ChannelStats", {"scale"}, {"s", "q"})), InvalidInput);
}

TEST(SpatialBNCombinedStats, ShapeInference) {
  NetDef net;
  *net.add_op() = MakeOperatorDef("ChannelStats", {"x"}, {"s", "q"});
  *net.add_op() = CombinedBN(2);
  *net.add_op() =
      MakeOperatorDef("ChannelBackpropStats", {"x", "saved_mean", "saved_var", "y"}, {"ds", "db"});
  *net.add_op() = MakeOperatorDef("SpatialBNCombinedGradient",
                                  {"x", "scale", "y", "saved_mean", "saved_var", "ds", "db"}, {"dx"});
  Shape c{3};
  auto shapes = InferNetShapes(net, {{"x", {{4, 3, 5, 5}}},
                                     {"scale", {c}},
                                     {"bias", {c}},
                                     {"rm", {c}},
                                     {"rv", {c}},
                                     {"s_combined", {c}},
                                     {"q_combined", {c}}});
  EXPECT_EQ(shapes["s"].dims, c);
  EXPECT_EQ(shapes["y"].dims, (Shape{4, 3, 5, 5}));
  EXPECT_EQ(shapes["saved_var"].dims, c);
  EXPECT_EQ(shapes["db"].dims, c);
  EXPECT_EQ(shapes["dx"].dims, (Shape{4, 3, 5, 5}));
}

}  // namespace lockstep::testing
