"""Parameter updates, as Caffe2's ``optimizer``: an iteration counter, a learning-rate schedule and one
momentum-SGD update per trainable parameter of the current replica, as graph operators.

Call it from the param_update_builder_fun of ``data_parallel_model.Parallelize``. Learning-rate policies:
fixed; step (stepsize, gamma); multistep (stepsizes, gamma); cosine (max_iter); each with an optional linear
warm-up (warmup_iter, warmup_start_factor).
"""
from lockstep._core import C, InvalidInput


def add_weight_decay(model, weight_decay):
    """L2 weight decay on the weights (not the biases) of the updates that build_sgd adds after this."""
    if weight_decay < 0:
        raise InvalidInput(f"add_weight_decay: weight_decay must not be negative, got {weight_decay}")
    model._weight_decay = float(weight_decay)


def build_sgd(model, base_learning_rate, momentum=0.0, nesterov=False, weight_decay=None, policy=None,
              **policy_args):
    """Momentum SGD; returns {"iter", "lr", "moments"}: the blobs it created. policy defaults to
    LearningRate's."""
    if weight_decay is None:
        weight_decay = getattr(model, "_weight_decay", 0.0)
    schedule = {} if policy is None else {"policy": str(policy)}
    schedule.update(policy_args)
    with model.scopes():
        blobs = C.add_momentum_sgd(model._cpp, float(base_learning_rate), float(momentum), bool(nesterov),
                                   float(weight_decay), schedule)
    if hasattr(model, "_lr_blobs"):  # data_parallel_model.GetLearningRateBlobNames lists them
        model._lr_blobs.append(blobs["lr"])
    return blobs


def build_multi_precision_sgd(model, base_learning_rate, **kwargs):
    """build_sgd for models that compute in float16 or bfloat16 (mixed_precision.compute_in): lockstep keeps
    every parameter and its update in float32 (the 16-bit copies are cast from them in the forward pass), so
    this is build_sgd."""
    return build_sgd(model, base_learning_rate, **kwargs)
