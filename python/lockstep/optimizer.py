"""Parameter updates, as Caffe2's ``optimizer``: an iteration counter, a learning-rate schedule and one
momentum-SGD update per trainable parameter of the current replica, as graph operators.

Call it from the param_update_builder_fun of ``data_parallel_model.Parallelize``. Learning-rate policies:
fixed; step (stepsize, gamma); multistep (stepsizes, gamma); cosine (max_iter); each with an optional linear
warm-up (warmup_iter, warmup_start_factor).
"""
from lockstep._core import C, InvalidInput


def add_weight_decay(model, weight_decay):
    """L2 weight decay on the weights (not the biases), as Caffe2 adds it: ops after the backward pass add
    weight_decay * weight to each weight's gradient, whatever update follows (build_sgd or one written by
    hand). Call it after the gradients exist (in Parallelize: in the update builder)."""
    if not weight_decay >= 0:
        raise InvalidInput(f"add_weight_decay: weight_decay must not be negative, got {weight_decay}")
    if weight_decay == 0:
        return
    weights = [info for info in model.GetOptimizationParamInfo(model.GetParams()) if info.tag == "weight"]
    if any(info.grad is None for info in weights):
        raise InvalidInput(f"add_weight_decay: model '{model.name}' has no gradients yet: call "
                           "AddGradientOperators(losses) first")
    decay = model.param_init_net.ConstantFill([], f"wd_{weight_decay}", shape=[1], value=float(weight_decay))
    one = model.param_init_net.ConstantFill([], "wd_one", shape=[1], value=1.0)
    for info in weights:
        model.net.WeightedSum([info.grad, one, info.blob, decay], info.grad)


def build_sgd(model, base_learning_rate, momentum=0.0, nesterov=False, weight_decay=0.0, policy=None,
              **policy_args):
    """Momentum SGD; returns {"iter", "lr", "moments"}: the blobs it created. policy defaults to
    LearningRate's. weight_decay decays the weights within the update, in the same pass."""
    schedule = {} if policy is None else {"policy": str(policy)}
    schedule.update(policy_args)
    with model.scopes():
        blobs = C.add_momentum_sgd(model._cpp, float(base_learning_rate), float(momentum), bool(nesterov),
                                   float(weight_decay or 0.0), schedule)
    if hasattr(model, "_lr_blobs"):  # data_parallel_model.GetLearningRateBlobNames lists them
        model._lr_blobs.append(blobs["lr"])
    return blobs


def build_multi_precision_sgd(model, base_learning_rate, **kwargs):
    """build_sgd for models that compute in float16 or bfloat16 (mixed_precision.compute_in): lockstep keeps
    every parameter and its update in float32 (the 16-bit copies are cast from them in the forward pass), so
    this is build_sgd."""
    return build_sgd(model, base_learning_rate, **kwargs)
