// Momentum SGD update ops.
#include "lockstep/model/optimizer.h"

#include <cmath>

#include "lockstep/ops/op_defs.h"

namespace lockstep {

SgdBlobs AddMomentumSgd(ModelHelper& model, const SgdOptions& options) {
  // Checked before any op is added, so that a refused call leaves the model as it was.
  // A rate of 0 trains nothing and a negative one climbs the loss (Caffe2's negative base_lr belongs to its
  // LearningRate op, which lockstep's update does not take); momentum 1 or more never lets a step fade.
  if (!(options.base_learning_rate > 0 && std::isfinite(options.base_learning_rate)))
    throw InvalidInput(fmt::format("the learning rate must be positive, got {}", options.base_learning_rate));
  if (!(options.momentum >= 0 && options.momentum < 1))
    throw InvalidInput(fmt::format("momentum must be in [0, 1), got {}", options.momentum));
  if (!(options.weight_decay >= 0 && std::isfinite(options.weight_decay)))
    throw InvalidInput(fmt::format("weight decay must be at least 0, got {}", options.weight_decay));
  const std::vector<std::string> params = model.GetTrainableParams(model.name_scope());
  if (!params.empty() && model.param_to_grad().empty())
    throw InvalidInput(fmt::format(
        "model '{}' has no gradients yet: call AddGradientOperators(losses) before adding the optimizer",
        model.name()));
  for (const auto& param : params)
    if (!model.param_to_grad().count(param))
      throw InvalidInput(
          fmt::format("parameter '{}' gets no gradient from the loss; remove it or connect it", param));
  SgdBlobs blobs;
  blobs.iter = model.Scoped("iter");
  // A second optimizer would update every parameter twice a step, on a second iteration count.
  for (const auto& op : model.net().op())
    if (op.type() == "Iter" && op.output_size() > 0 && op.output(0) == blobs.iter)
      throw InvalidInput(fmt::format("model '{}' has an optimizer already ('{}' counts its steps); build one",
                                     model.name(), blobs.iter));
  blobs.lr = model.Scoped("lr");
  auto* init_iter = model.param_init_net().add_op();
  *init_iter = ConstantFillDef(blobs.iter, {}, 0.0f, DataType::kInt64);
  SetDevice(init_iter, model.device());
  model.AddOp(IterDef(blobs.iter));
  std::vector<Arg> lr_args = {Arg("base_lr", options.base_learning_rate)};
  lr_args.insert(lr_args.end(), options.schedule.begin(), options.schedule.end());  // none: LearningRate's
  model.AddOp(LearningRateDef(blobs.iter, blobs.lr, lr_args));

  for (const auto& param : params) {
    auto grad = model.param_to_grad().find(param);
    // The update runs where the parameter lives (a model-parallel replica spans several devices).
    ModelHelper::DeviceScope device_scope(model, model.Param(param).device);
    std::string moment = param + "_momentum";
    auto* init = model.param_init_net().add_op();
    *init = ConstantFillDef(moment, model.Param(param).shape, 0.0f);
    SetDevice(init, model.device());
    float decay = model.Param(param).tag == ParamTag::kWeight ? options.weight_decay : 0.0f;
    model.AddOp(MomentumSgdUpdateDef(grad->second, moment, blobs.lr, param, options.momentum,
                                     options.nesterov, decay));
    blobs.moments.push_back(moment);
  }
  return blobs;
}

}  // namespace lockstep
