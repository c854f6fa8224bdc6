// The whole backward pass of a small residual network (conv, BN with fused relu, BN, residual add, relu,
// pooling, FC, softmax loss) built by the layer helpers and AddGradientOperators, checked against finite
// differences of the loss.
#include <cmath>

#include "lockstep/model/layers.h"
#include "test_util.h"

namespace lockstep::testing {

TEST(NetGradient, ResidualNetworkMatchesFiniteDifferences) {
  ModelHelper model("tiny");
  layers::ConvOptions conv;
  conv.pad = 1;
  conv.weight_init = FillSpec::Gaussian(0.3f);
  std::string x = layers::Conv(model, "data", "conv1", 3, 8, 3, conv);
  x = layers::SpatialBN(model, x, "bn1", 8, /*is_test=*/false, /*relu=*/true);
  std::string branch = layers::Conv(model, x, "conv2", 8, 8, 3, conv);
  branch = layers::SpatialBN(model, branch, "bn2", 8, false);
  x = layers::Add(model, branch, x, "sum");
  x = layers::Relu(model, x, "relu2");
  x = layers::MaxPool(model, x, "pool", 2, 2);
  x = layers::GlobalAveragePool(model, x, "gap");
  x = layers::FC(model, x, "fc", 8, 5, FillSpec::Gaussian(0.3f));
  auto [softmax, loss] = layers::SoftmaxWithLoss(model, x, "label", "softmax", "loss");
  const auto& grads = model.AddGradientOperators({loss});

  Workspace ws;
  for (int i = 0; i < model.param_init_net().op_size(); ++i)
    model.param_init_net().mutable_op(i)->mutable_device_option()->set_random_seed(100 + i);
  ws.RunNetOnce(model.param_init_net());
  Feed(&ws, "data", RandomTensor({4, 3, 6, 6}, 3));
  Feed(&ws, "label", Int32Tensor({4}, {0, 3, 1, 4}));

  NetDef forward;  // the forward ops only, to evaluate the loss at perturbed parameters
  forward.set_name("forward");
  for (const auto& op : model.net().op())
    if (!op.is_gradient_op()) *forward.add_op() = op;
  Net* train = ws.CreateNet(model.net());
  Net* loss_only = ws.CreateNet(forward);
  train->Run();

  const float step = 1e-3f;  // small: BN centres activations on the relu kink
  for (const auto& param : model.GetTrainableParams()) {
    ASSERT_TRUE(grads.count(param)) << param;
    Tensor analytic;
    ws.Blob(grads.at(param)).ToPlain(&analytic);
    float* value = ws.GetBlob(param)->data<float>();
    for (int64_t j = 0; j < std::min<int64_t>(analytic.numel(), 6); ++j) {
      float saved = value[j];
      value[j] = saved + step;
      loss_only->Run();
      double plus = ws.Blob(loss).data<float>()[0];
      value[j] = saved - step;
      loss_only->Run();
      double minus = ws.Blob(loss).data<float>()[0];
      value[j] = saved;
      float numeric = static_cast<float>((plus - minus) / (2 * step));
      float expected = analytic.data<float>()[j];
      EXPECT_NEAR(expected, numeric, 2e-3f + 2e-2f * std::fabs(numeric)) << param << "[" << j << "]";
    }
  }
}

}  // namespace lockstep::testing
