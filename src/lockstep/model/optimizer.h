// SGD with momentum (optionally Nesterov) as graph ops: an iteration counter, a learning-rate op, and one
// MomentumSGDUpdate per trainable parameter; weight decay applies to WEIGHT-tagged parameters only.
#pragma once

#include <string>
#include <vector>

#include "lockstep/core/net_def.h"
#include "lockstep/model/model_helper.h"

namespace lockstep {

struct SgdOptions {
  float base_learning_rate = 0.1f;
  float momentum = 0.9f;
  bool nesterov = false;
  float weight_decay = 1e-4f;
  // LearningRate op arguments beyond base_lr (policy "fixed" when empty).
  std::vector<Arg> schedule;
};

// Blob names the optimizer creates (scoped): "iter" (int64), "lr" (float), "<param>_momentum".
struct SgdBlobs {
  std::string iter;
  std::string lr;
  std::vector<std::string> moments;
};

// Adds the update for the parameters of the current name scope using model.param_to_grad().
SgdBlobs AddMomentumSgd(ModelHelper& model, const SgdOptions& options);

}  // namespace lockstep
