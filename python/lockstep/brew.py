"""Layers with Caffe2's ``brew`` names and arguments. Each adds its parameters to ``param_init_net`` and its
operators to ``net`` (through the C++ layers) and returns its output blob. Arguments not given take the
defaults the operators' schemas declare (``core.schema``).

Initializers are ``(fill_type, {args})`` pairs, e.g. ``("GaussianFill", {"std": 0.01})``; conv and fc default
to XavierFill weights and zero biases. ``model.arg_scope`` supplies default keyword arguments.
"""
import numbers

from lockstep import core
from lockstep._core import C, InvalidInput

_XAVIER = ("XavierFill", {})
_ZERO = ("ConstantFill", {"value": 0.0})
# Caffe2 arguments that choose what lockstep always does: NCHW order, cuDNN on CUDA devices (any engine: the
# implementation follows the device), buffers it plans itself (shared_buffer).
_ACCEPTED = {"order": "NCHW", "use_cudnn": None, "cudnn_exhaustive_search": None, "ws_nbytes_limit": None,
             "engine": None, "shared_buffer": None}
# The per-side spellings of a window that is not square, which the operators take as Caffe2's do.
_SIDES = {"kernel": ("kernel_h", "kernel_w", "kernels"), "stride": ("stride_h", "stride_w", "strides"),
          "pad": ("pad_t", "pad_l", "pad_b", "pad_r", "pads"), "dilation": ("dilation_h", "dilation_w", "dilations")}
_POOL_SIDES = _SIDES["kernel"] + _SIDES["stride"] + _SIDES["pad"]
_CONV_SIDES = _SIDES["stride"] + _SIDES["pad"] + _SIDES["dilation"]


def _options(layer, model, kwargs, known):
    """The layer's keyword arguments over model.arg_scope's; unknown ones are an error."""
    merged = {k: v for k, v in model.arg_scope.items() if k in known or k in _ACCEPTED}
    merged.update(kwargs)
    for name, value in merged.items():
        if name in _ACCEPTED:
            if _ACCEPTED[name] is not None and value != _ACCEPTED[name]:
                raise InvalidInput(f"brew.{layer}: {name}={value!r} is not supported; lockstep uses "
                                   f"{name}={_ACCEPTED[name]!r}")
        elif name not in known:
            hint = f"known: {', '.join(sorted(known))}" if known else "it takes no other keyword arguments"
            raise InvalidInput(f"brew.{layer}: unknown argument '{name}'; {hint}")
    return {k: v for k, v in merged.items() if k in known}


def _sizes(layer, **sizes):
    """Channel counts and kernel sizes are whole numbers of at least 1: a float (a dim_in computed with /)
    is refused here in one line, not by the binding in many."""
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise InvalidInput(f"brew.{layer}: {name} must be a whole number of at least 1, got {value!r}")


def _fill(init, default, layer):
    if init is None:
        return default
    try:
        fill, args = init
        return str(fill), dict(args or {})
    except (TypeError, ValueError):
        raise InvalidInput(f"brew.{layer}: an initializer is (fill_type, {{args}}), got {init!r}") from None


def _in(model, blob):
    return model._scope_name(blob)


def _out(name):
    return core.BlobReference(name)


def _sides(layer, given):
    """The per-side window arguments among the ``given`` ones (C++ layers: WindowSides); a role given both
    ways (stride and stride_h) is refused, as the operators refuse it."""
    sides = {}
    for role, names in _SIDES.items():
        spelled = {name: given[name] for name in names if name in given}
        if spelled and role in given:
            raise InvalidInput(f"brew.{layer}: give {role} or {'/'.join(names)}, not both")
        sides.update(spelled)
    return sides


def conv(model, blob_in, blob_out, dim_in, dim_out, kernel, weight_init=None, bias_init=None, **kwargs):
    """``kernel`` is an int or [height, width]; stride_h, pad_t, dilations and the other per-side spellings of
    the Conv operator are taken too."""
    sides = {}
    if isinstance(kernel, (list, tuple)):
        if len(kernel) != 2:
            raise InvalidInput(f"brew.conv: kernel is an int or [height, width], got {kernel!r}")
        _sizes("conv", kernel_h=kernel[0], kernel_w=kernel[1])
        sides = {"kernel_h": kernel[0], "kernel_w": kernel[1]}
        kernel = kernel[0]
    _sizes("conv", dim_in=dim_in, dim_out=dim_out, kernel=kernel)
    known = {"stride", "pad", "dilation", "group", "no_bias", *_CONV_SIDES}
    given = _options("conv", model, kwargs, known)
    o = {**core.arg_defaults("Conv"), **given}
    sides.update(_sides("conv", given))
    w, b = _fill(weight_init, _XAVIER, "conv"), _fill(bias_init, _ZERO, "conv")
    with model.scopes():
        return _out(C.conv(model._cpp, _in(model, blob_in), blob_out, dim_in, dim_out, kernel, o["stride"], o["pad"],
                           o["dilation"], o["group"], not o.get("no_bias", False), w[0], w[1], b[0], b[1], sides))


def fc(model, blob_in, blob_out, dim_in, dim_out, weight_init=None, bias_init=None, **kwargs):
    _sizes("fc", dim_in=dim_in, dim_out=dim_out)
    o = {**core.arg_defaults("FC"), **_options("fc", model, kwargs, {"axis"})}
    w, b = _fill(weight_init, _XAVIER, "fc"), _fill(bias_init, _ZERO, "fc")
    with model.scopes():
        return _out(C.fc(model._cpp, _in(model, blob_in), blob_out, dim_in, dim_out, w[0], w[1], b[0], b[1],
                         o["axis"]))


def relu(model, blob_in, blob_out, **kwargs):
    _options("relu", model, kwargs, set())
    with model.scopes():
        return _out(C.relu(model._cpp, _in(model, blob_in), blob_out))


def _pool(layer, op_type, op, model, blob_in, blob_out, kwargs):
    known = {"kernel", "stride", "pad", "global_pooling", *_POOL_SIDES}
    given = _options(layer, model, kwargs, known)
    o = {**core.arg_defaults(op_type), **given}
    sides = _sides(layer, given)
    with model.scopes():
        if o.get("global_pooling"):
            if layer != "average_pool":
                raise InvalidInput(f"brew.{layer}: global_pooling is supported by average_pool only")
            return _out(C.global_average_pool(model._cpp, _in(model, blob_in), blob_out))
        if "kernel" not in o and not sides.keys() & set(_SIDES["kernel"]):
            raise InvalidInput(f"brew.{layer}: 'kernel' (or kernel_h and kernel_w) is required, or global_pooling=True")
        return _out(op(model._cpp, _in(model, blob_in), blob_out, o.get("kernel", 0), o["stride"], o["pad"], sides))


def max_pool(model, blob_in, blob_out, **kwargs):
    return _pool("max_pool", "MaxPool", C.max_pool, model, blob_in, blob_out, kwargs)


def average_pool(model, blob_in, blob_out, **kwargs):
    return _pool("average_pool", "AveragePool", C.average_pool, model, blob_in, blob_out, kwargs)


def spatial_bn(model, blob_in, blob_out, dim_in, epsilon=None, momentum=None, is_test=False, init_scale=1.0,
               init_bias=0.0, **kwargs):
    """epsilon and momentum default to SpatialBN's; init_scale and init_bias are the scale's and bias' first
    values, as Caffe2's."""
    _sizes("spatial_bn", dim_in=dim_in)
    _options("spatial_bn", model, kwargs, set())
    defaults = core.arg_defaults("SpatialBN")
    epsilon = defaults["epsilon"] if epsilon is None else epsilon
    momentum = defaults["momentum"] if momentum is None else momentum
    with model.scopes():
        return _out(C.spatial_bn(model._cpp, _in(model, blob_in), blob_out, dim_in, bool(is_test), False,
                                 float(epsilon), float(momentum), float(init_scale), float(init_bias)))


def dropout(model, blob_in, blob_out, ratio=None, is_test=False, **kwargs):
    """ratio defaults to Dropout's."""
    _options("dropout", model, kwargs, set())
    ratio = core.arg_defaults("Dropout")["ratio"] if ratio is None else ratio
    with model.scopes():
        return _out(C.dropout(model._cpp, _in(model, blob_in), blob_out, float(ratio), bool(is_test)))


def sum(model, blobs_in, blob_out, **kwargs):  # noqa: A001 (Caffe2's name)
    _options("sum", model, kwargs, set())
    with model.scopes():
        inputs = [_in(model, blob) for blob in blobs_in]
        if len(inputs) == 2:
            return _out(C.add(model._cpp, inputs[0], inputs[1], blob_out))
    return model.net.Sum([core.BlobReference(blob) for blob in inputs], blob_out)


def softmax_with_loss(model, blobs_in, blobs_out, **kwargs):
    """Returns (softmax, loss): the mean cross-entropy of ``blobs_in = [logits, label]``."""
    _options("softmax_with_loss", model, kwargs, set())
    logits, label = blobs_in
    softmax, loss = blobs_out
    with model.scopes():
        out = C.softmax_with_loss(model._cpp, _in(model, logits), _in(model, label), softmax, loss)
    return _out(out[0]), _out(out[1])


def concat(model, blobs_in, blob_out, **kwargs):
    """Joins ``blobs_in`` along ``axis`` (default: Concat's, the channels) and returns the result; as Caffe2's,
    the inputs' extents go to ``_<blob_out>_concat_dims``."""
    options = _options("concat", model, kwargs, {"axis"})
    return model.net.Concat(list(blobs_in), [blob_out, f"_{blob_out}_concat_dims"], **options)[0]


depth_concat = concat  # Caffe2's older name


def tanh(model, blob_in, blob_out, **kwargs):
    return model.net.Tanh(blob_in, blob_out, **_options("tanh", model, kwargs, set()))


def sigmoid(model, blob_in, blob_out, **kwargs):
    return model.net.Sigmoid(blob_in, blob_out, **_options("sigmoid", model, kwargs, set()))


def softmax(model, blob_in, blob_out, **kwargs):
    """The softmax of blob_in's rows (Caffe2's brew.softmax); axis defaults to Softmax's."""
    return model.net.Softmax(blob_in, blob_out, **_options("softmax", model, kwargs, {"axis"}))


def accuracy(model, blobs_in, blob_out, top_k=None, **kwargs):
    """top_k defaults to Accuracy's."""
    _options("accuracy", model, kwargs, set())
    top_k = core.arg_defaults("Accuracy")["top_k"] if top_k is None else top_k
    predictions, label = blobs_in
    with model.scopes():
        return _out(C.accuracy(model._cpp, _in(model, predictions), _in(model, label), blob_out, int(top_k)))


def scale(model, blob_in, blob_out, scale=None, **kwargs):
    """scale defaults to Scale's."""
    _options("scale", model, kwargs, set())
    scale = core.arg_defaults("Scale")["scale"] if scale is None else scale
    with model.scopes():
        return _out(C.scale(model._cpp, _in(model, blob_in), blob_out, float(scale)))


def flatten(model, blob_in, blob_out, **kwargs):
    _options("flatten", model, kwargs, set())
    with model.scopes():
        return _out(C.flatten(model._cpp, _in(model, blob_in), blob_out))


def image_input(model, reader, blobs_out, **kwargs):
    """Reads this replica's slice of the next batch from ``reader`` (a CreateDB output) into
    ``blobs_out = [data, label]``; what the reader reads and how is set where it is created."""
    _options("image_input", model, kwargs, set())
    data, label = blobs_out
    with model.scopes():
        out = C.read_batch(model._cpp, str(reader), data, label)
    return _out(out[0]), _out(out[1])
