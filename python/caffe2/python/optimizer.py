"""Caffe2's ``optimizer`` over lockstep's: momentum SGD with Caffe2's keyword arguments and defaults (policy
"fixed", Nesterov momentum unless ``nesterov=0``), weight decay on the weights."""
from caffe2.python._unsupported import missing_names, refuse
from lockstep import optimizer as _optimizer
from lockstep.optimizer import add_weight_decay  # noqa: F401 (re-exported)


def _refuse_unsupported(name, max_gradient_norm, allow_lr_injection, kwargs):
    if max_gradient_norm is not None:
        refuse(f"optimizer.{name}: max_gradient_norm (gradient clipping) is not supported")
    if allow_lr_injection:
        refuse(f"optimizer.{name}: allow_lr_injection is not supported")
    if kwargs.pop("sparse_dedup_aggregator", None) is not None:
        refuse(f"optimizer.{name}: sparse gradients (sparse_dedup_aggregator) are not supported")
    if kwargs.pop("lars", None) is not None:
        refuse(f"optimizer.{name}: LARS is not supported")


def build_sgd(model, base_learning_rate, max_gradient_norm=None, allow_lr_injection=False, policy="fixed",
              momentum=0.0, nesterov=1, **kwargs):
    """Momentum SGD; the other keyword arguments are the learning-rate policy's (stepsize, gamma, ...)."""
    _refuse_unsupported("build_sgd", max_gradient_norm, allow_lr_injection, kwargs)
    return _optimizer.build_sgd(model, base_learning_rate, momentum=momentum, nesterov=bool(nesterov),
                                policy=policy, **kwargs)


def build_multi_precision_sgd(model, base_learning_rate, max_gradient_norm=None, allow_lr_injection=False,
                              **kwargs):
    """build_sgd: lockstep's parameters and their update are float32 already."""
    return build_sgd(model, base_learning_rate, max_gradient_norm, allow_lr_injection, **kwargs)


def build_fp16_sgd(model, base_learning_rate, **kwargs):
    refuse("optimizer.build_fp16_sgd: float16 parameters are not supported; lockstep keeps parameters "
           "float32 (use build_multi_precision_sgd)")


def _refuse_optimizer(name):
    def build(model, *args, **kwargs):
        refuse(f"optimizer.{name} is not supported; lockstep has momentum SGD (build_sgd)")

    build.__name__ = name
    return build


build_adagrad = _refuse_optimizer("build_adagrad")
build_adam = _refuse_optimizer("build_adam")
build_ftrl = _refuse_optimizer("build_ftrl")
build_rms_prop = _refuse_optimizer("build_rms_prop")


# Caffe2 names this adapter lacks: one line naming them.
__getattr__ = missing_names("caffe2.python.optimizer")
