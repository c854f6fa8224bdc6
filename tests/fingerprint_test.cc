// Model fingerprints: models built alike agree, a different layer width, device count or gradient wire dtype
// shows up, and FirstDifference names the first entry that differs, with both values and the shard.
#include "lockstep/parallel/fingerprint.h"

#include <gtest/gtest.h>

#include "lockstep/model/layers.h"
#include "lockstep/model/optimizer.h"

namespace lockstep::testing {
namespace {

// FC (16 -> hidden) -> relu -> FC (hidden -> 3) -> softmax loss, on `devices` devices.
Fingerprint SmallModelFingerprint(int hidden, int devices = 2, DataType wire = DataType::kFloat) {
  ParallelOptions o;
  o.allreduce_dtype = wire;
  for (int d = 0; d < devices; ++d) o.devices.push_back(d);
  o.threads_per_device = 1;
  o.input_builder = [](ModelHelper& model) { layers::ReadBatch(model, "reader", "data", "label"); };
  o.forward_builder = [hidden](ModelHelper& model, float loss_scale) {
    std::string x = layers::FC(model, model.Scoped("data"), "fc1", 16, hidden);
    x = layers::Relu(model, x, "relu");
    x = layers::FC(model, x, "fc2", hidden, 3);
    auto [softmax, loss] = layers::SoftmaxWithLoss(model, x, model.Scoped("label"), "softmax", "loss");
    return std::vector<std::string>{layers::Scale(model, loss, "scaled_loss", loss_scale)};
  };
  o.param_update_builder = [](ModelHelper& model) { AddMomentumSgd(model, SgdOptions{}); };
  ModelHelper model("small");
  DataParallelModel parallel = Parallelize(model, o);
  return ModelFingerprint(model, parallel);
}

TEST(Fingerprint, FirstDifference) {
  const Fingerprint first{{"lockstep version", "1.0"}, {"parameter fc_w", "(3, 4)"}, {"state blobs", "fc_w"}};
  EXPECT_EQ(FirstDifference(first, first, 1), "");

  Fingerprint changed = first;
  changed[1].second = "(3, 5)";
  EXPECT_EQ(FirstDifference(first, changed, 2), "parameter fc_w is (3, 4) on shard 0 but (3, 5) on shard 2");

  Fingerprint fewer{first[0], first[2]};
  EXPECT_EQ(FirstDifference(first, fewer, 3), "parameter fc_w exists on shard 0 but not on shard 3");

  Fingerprint more = first;
  more.emplace_back("parameter fc_b", "(3)");
  EXPECT_EQ(FirstDifference(first, more, 1), "parameter fc_b exists on shard 1 but not on shard 0");
}

TEST(Fingerprint, ModelsBuiltAlikeAgreeAndAWidthDiffers) {
  const Fingerprint model = SmallModelFingerprint(8);
  EXPECT_EQ(SmallModelFingerprint(8), model);
  EXPECT_EQ(FirstDifference(model, SmallModelFingerprint(8), 1), "");

  const std::string wider = FirstDifference(model, SmallModelFingerprint(9), 1);
  EXPECT_NE(wider.find("parameter fc1_w"), std::string::npos) << wider;
  EXPECT_NE(wider.find("on shard 1"), std::string::npos) << wider;

  const std::string devices = FirstDifference(model, SmallModelFingerprint(8, 3), 2);
  EXPECT_EQ(devices, "devices per shard is 2 on shard 0 but 3 on shard 2");
}

// Shards that sent their gradients in different dtypes would read each other's bytes as other numbers.
TEST(Fingerprint, TheGradientWireDtypeMustAgree) {
  const Fingerprint model = SmallModelFingerprint(8);
  EXPECT_EQ(FirstDifference(model, SmallModelFingerprint(8, 2, DataType::kBFloat16), 1),
            "gradient wire dtype is float32 on shard 0 but bfloat16 on shard 1");
  EXPECT_EQ(FirstDifference(SmallModelFingerprint(8, 2, DataType::kFloat16),
                            SmallModelFingerprint(8, 2, DataType::kBFloat16), 3),
            "gradient wire dtype is float16 on shard 0 but bfloat16 on shard 3");
}

}  // namespace
}  // namespace lockstep::testing
