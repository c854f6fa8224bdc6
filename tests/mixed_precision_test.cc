// Mixed precision as graph rewriting: the forward pass reads 16-bit casts of its input and parameters (batch
// normalization's stay float32), its output is cast back, and the backward pass hands float32 gradients to
// the float32 master parameters through the casts' gradients; the loss scale is divided out before the
// update.
#include "lockstep/model/mixed_precision.h"

#include <set>

#include "lockstep/model/layers.h"
#include "lockstep/model/zoo.h"
#include "test_util.h"

namespace lockstep::testing {
namespace {

const OperatorDef* WriterOf(const NetDef& net, const std::string& blob) {
  const OperatorDef* writer = nullptr;
  for (const auto& op : net.op())
    for (const auto& out : op.output())
      if (out == blob) writer = &op;
  return writer;
}

// ResNet-18 in bfloat16 on `device`: the forward pass reads 16-bit casts of its input and parameters (but
// for what the device's kernels convert themselves: a CPU convolution's float32 filter), BN keeps float32,
// and every master parameter gets a float32 gradient.
void ExpectCastsAroundTheForwardPass(const Device& device) {
  ModelHelper model("resnet");
  ModelHelper::DeviceScope scope(model, device);
  model.AddOp("ConstantFill", {}, {"data"}, {Arg("shape", std::vector<int64_t>{2, 3, 32, 32})});
  const int first = model.net().op_size();
  ModelConfig config;
  config.image_size = 32;
  config.num_labels = 10;
  std::string logits = BuildModel("resnet18", model, "data", config);
  std::string float_logits = ComputeInLowPrecision(model, first, "data", logits, DataType::kBFloat16);
  EXPECT_EQ(float_logits, logits + "_float");
  const NetDef& net = model.net();
  const bool cpu = device.type == DeviceType::kCpu;
  std::set<std::string> read_as_float;  // master parameters a forward op reads itself
  for (const auto& op : net.op()) {
    if (op.type() == "Conv" || op.type() == "FC") {
      EXPECT_NE(op.input(0), "data") << "the input is read through its cast";
      for (int k = 1; k < op.input_size(); ++k) {  // weight and bias
        const OperatorDef* cast = WriterOf(net, op.input(k));
        if (cpu && op.type() == "Conv") {
          EXPECT_EQ(cast, nullptr) << "the CPU convolution converts its filter itself: "
                                   << DescribeOperator(op);
          read_as_float.insert(op.input(k));
          continue;
        }
        ASSERT_NE(cast, nullptr) << DescribeOperator(op);
        EXPECT_EQ(cast->type(), "Cast") << DescribeOperator(op);
        EXPECT_EQ(GetIntArgument(*cast, "to", 0), int(DataType::kBFloat16));
      }
    }
    if (op.type() == "SpatialBN")
      for (int k = 1; k < op.input_size(); ++k)
        EXPECT_EQ(op.input(k).find("_bf16"), std::string::npos)
            << "BN keeps float32: " << DescribeOperator(op);
  }
  EXPECT_EQ(read_as_float.empty(), !cpu);
  EXPECT_EQ(WriterOf(net, float_logits)->type(), "Cast");

  std::set<std::string> bn_params;
  for (const auto& op : net.op())
    if (op.type() == "SpatialBN") bn_params.insert(op.input().begin() + 1, op.input().end());
  EXPECT_FALSE(bn_params.empty());
  auto [softmax, loss] = layers::SoftmaxWithLoss(model, float_logits, "label", "softmax", "loss");
  const auto& grads = model.AddGradientOperators({loss});
  for (const auto& param : model.GetTrainableParams()) {
    const OperatorDef* writer = WriterOf(model.net(), grads.at(param));
    ASSERT_NE(writer, nullptr) << param;
    if (bn_params.count(param)) continue;  // from SpatialBNGradient, in float32 already
    if (read_as_float.count(param)) {      // ConvGradient writes it in the filter's dtype
      EXPECT_EQ(writer->type(), "ConvGradient") << param;
      continue;
    }
    // The master parameter's gradient is the Cast back of the 16-bit copy's gradient (a Sum when the copy
    // feeds several ops is summed in 16 bits first).
    EXPECT_EQ(writer->type(), "Cast") << param;
    EXPECT_EQ(writer->input(1), param) << "cast to the master parameter's dtype";
  }
}

TEST(MixedPrecision, ForwardReadsCastsAndMasterParametersGetFloatGradients) {
  ExpectCastsAroundTheForwardPass({DeviceType::kCpu, 0});
  ExpectCastsAroundTheForwardPass({DeviceType::kCuda, 0});
}

TEST(MixedPrecision, UnscaleGradientsDividesEachGradientOnItsParametersDevice) {
  ModelHelper model("fc");
  {
    ModelHelper::DeviceScope scope(model, {DeviceType::kCpu, 1});
    auto logits = layers::FC(model, "data", "fc", 4, 3);
    auto [softmax, loss] = layers::SoftmaxWithLoss(model, logits, "label", "softmax", "loss");
    model.AddGradientOperators({loss});
  }
  const int before = model.net().op_size();
  UnscaleGradients(model, 128.0f);
  ASSERT_EQ(model.net().op_size(), before + 2);
  for (int i = before; i < model.net().op_size(); ++i) {
    const auto& op = model.net().op(i);
    EXPECT_EQ(op.type(), "Scale");
    EXPECT_EQ(op.input(0), op.output(0));
    EXPECT_FLOAT_EQ(GetFloatArgument(op, "scale", 0), 1.0f / 128);
    EXPECT_EQ(DeviceOf(op), (Device{DeviceType::kCpu, 1}));
  }
  UnscaleGradients(model, 1.0f);
  EXPECT_EQ(model.net().op_size(), before + 2) << "a scale of 1 adds nothing";
}

TEST(MixedPrecision, OnlySixteenBitTypes) {
  ModelHelper model("fc");
  model.AddOp("ConstantFill", {}, {"data"}, {Arg("shape", std::vector<int64_t>{2, 4})});
  auto logits = layers::FC(model, "data", "fc", 4, 3);
  EXPECT_THROW(ComputeInLowPrecision(model, 1, "data", logits, DataType::kFloat), InvalidInput);
  EXPECT_THROW(ComputeInLowPrecision(model, 1, "other", logits, DataType::kFloat16), InvalidInput);
}

}  // namespace
}  // namespace lockstep::testing
