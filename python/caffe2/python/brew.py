"""Caffe2's ``brew`` over lockstep's: the same layer helpers, ``arg_scope``, and Caffe2's initializer
arguments (``WeightInitializer`` / ``BiasInitializer``). Layers build through lockstep's C++ layers."""
import contextlib
import threading

from caffe2.python._unsupported import missing_names, refuse
from caffe2.python.modeling.initializers import Initializer, PseudoFP16Initializer
from lockstep import brew as _brew
from lockstep import core

_scopes = threading.local()


@contextlib.contextmanager
def arg_scope(single_helper_or_list, **kwargs):
    """Default keyword arguments of the given helpers (brew.conv, ...) inside the block; they nest."""
    helpers = single_helper_or_list if isinstance(single_helper_or_list, (list, tuple)) else [
        single_helper_or_list]
    names = {helper if isinstance(helper, str) else helper.__name__ for helper in helpers}
    stack = getattr(_scopes, "stack", [])
    _scopes.stack = stack + [(names, kwargs)]
    try:
        yield
    finally:
        _scopes.stack = stack


def _arguments(helper, kwargs):
    merged = {}
    for names, scoped in getattr(_scopes, "stack", []):
        if helper in names:
            merged.update(scoped)
    merged.update(kwargs)
    return merged


def _initializer(layer, initializer, fill, default):
    """The (fill type, args) a layer's parameter gets from Caffe2's initializer arguments."""
    if initializer is None or initializer is Initializer:
        return fill or default
    if initializer is PseudoFP16Initializer or isinstance(initializer, PseudoFP16Initializer):
        refuse(f"brew.{layer}: PseudoFP16Initializer (float16 parameters) is not supported; lockstep keeps "
               "parameters float32 (lockstep.mixed_precision computes in 16 bits)")
    if isinstance(initializer, Initializer):
        return initializer.fill(fill or default)
    refuse(f"brew.{layer}: initializer {initializer!r} is not supported; pass Initializer or an instance")


def _compute_options(layer, kwargs):
    if kwargs.pop("float16_compute", False):
        refuse(f"brew.{layer}: float16_compute is not supported; lockstep computes in float32 (or bfloat16 "
               "through lockstep.mixed_precision)")
    kwargs.pop("enable_tensor_core", None)  # cuDNN and cuBLAS pick tensor cores themselves in lockstep
    if kwargs.pop("transform_inputs", None) is not None:
        refuse(f"brew.{layer}: transform_inputs is not supported")


def _parameters(layer, kwargs, given):
    """A conv's or fc's keyword arguments (arg_scope's under the given ones) and its weight and bias
    initializers as lockstep's (fill type, args) pairs. ``given``: the call's own weight_init, bias_init,
    WeightInitializer and BiasInitializer (None where not given), which an arg_scope may also set."""
    kwargs = _arguments(layer, kwargs)
    chosen = {name: kwargs.pop(name, None) if value is None else value for name, value in given.items()}
    for name in given:
        kwargs.pop(name, None)
    _compute_options(layer, kwargs)
    weight = _initializer(layer, chosen["WeightInitializer"], chosen["weight_init"], ("XavierFill", {}))
    bias = _initializer(layer, chosen["BiasInitializer"], chosen["bias_init"], ("ConstantFill", {"value": 0.0}))
    return kwargs, weight, bias


def conv(model, blob_in, blob_out, dim_in, dim_out, kernel, weight_init=None, bias_init=None,
         WeightInitializer=None, BiasInitializer=None, **kwargs):
    kwargs, weight, bias = _parameters("conv", kwargs, dict(
        weight_init=weight_init, bias_init=bias_init, WeightInitializer=WeightInitializer,
        BiasInitializer=BiasInitializer))
    return _brew.conv(model, blob_in, blob_out, dim_in, dim_out, kernel, weight_init=weight, bias_init=bias,
                      **kwargs)


def fc(model, blob_in, blob_out, dim_in, dim_out, weight_init=None, bias_init=None, WeightInitializer=None,
       BiasInitializer=None, **kwargs):
    kwargs, weight, bias = _parameters("fc", kwargs, dict(
        weight_init=weight_init, bias_init=bias_init, WeightInitializer=WeightInitializer,
        BiasInitializer=BiasInitializer))
    return _brew.fc(model, blob_in, blob_out, dim_in, dim_out, weight_init=weight, bias_init=bias, **kwargs)


def _helper(name):
    layer = getattr(_brew, name)

    def helper(model, *args, **kwargs):
        return layer(model, *args, **_arguments(name, kwargs))

    helper.__name__ = name
    helper.__doc__ = layer.__doc__
    return helper


relu = _helper("relu")
max_pool = _helper("max_pool")
average_pool = _helper("average_pool")


def spatial_bn(model, blob_in, blob_out, dim_in, *args, **kwargs):
    """Caffe2's signature: (dim_in, init_scale=1.0, init_bias=0.0, ScaleInitializer=None, BiasInitializer=None,
    RunningMeanInitializer=None, RunningVarianceInitializer=None); epsilon, momentum and is_test are keywords.
    An arg_scope may give any of them."""
    names = ("init_scale", "init_bias", "ScaleInitializer", "BiasInitializer", "RunningMeanInitializer",
             "RunningVarianceInitializer")
    if len(args) > len(names):
        raise TypeError(f"brew.spatial_bn takes at most {4 + len(names)} positional arguments")
    kwargs = _arguments("spatial_bn", {**kwargs, **dict(zip(names, args))})
    given = [name for name in names[2:] if kwargs.pop(name, None) is not None]
    if given:
        refuse(f"brew.spatial_bn: {', '.join(given)} is not supported; pass init_scale and init_bias (the running "
               "statistics start at 0 and 1)")
    return _brew.spatial_bn(model, blob_in, blob_out, dim_in, **kwargs)


dropout = _helper("dropout")
sum = _helper("sum")  # noqa: A001 (Caffe2's name)
softmax = _helper("softmax")
concat = _helper("concat")
depth_concat = _helper("depth_concat")
tanh = _helper("tanh")
sigmoid = _helper("sigmoid")
softmax_with_loss = _helper("softmax_with_loss")
accuracy = _helper("accuracy")
scale = _helper("scale")
flatten = _helper("flatten")


def image_input(model, blob_in, blob_out, order="NCHW", use_gpu_transform=False, **kwargs):
    """Caffe2's ImageInput: this replica's slice of the next batch of the reader ``blob_in`` (from
    ModelHelper.CreateDB) into ``blob_out = [data, label]``: decoded, resized so the shortest side is
    ``scale``, cropped to ``crop`` (randomly and mirrored in training, centred with ``is_test``), normalized
    as (pixel - 128) / 128 (Caffe2's mean and std of 128; fashion-mnist's images are read as pixel / 255, as
    every lockstep reader reads them). Decoding runs on CPU threads whatever ``use_gpu_transform`` says."""
    kwargs = _arguments("image_input", kwargs)
    reader = getattr(model, "_readers", {}).get(str(blob_in))
    if reader is None:
        return _brew.image_input(model, blob_in, blob_out, **kwargs)
    if order != "NCHW":
        refuse(f"brew.image_input: order={order!r} is not supported; lockstep reads images as NCHW")
    if kwargs.pop("output_type", "float") != "float":
        refuse("brew.image_input: output_type float16 is not supported; lockstep reads float images")
    for name in ("mean", "std"):
        values = kwargs.pop(name, 128.0)
        if any(float(v) != 128.0 for v in (values if isinstance(values, (list, tuple)) else [values])):
            refuse(f"brew.image_input: {name}={values} is not supported; lockstep normalizes image databases "
                   "as (pixel - 128) / 128 and fashion-mnist as pixel / 255")
    is_test = bool(kwargs.pop("is_test", False))
    if not is_test and not kwargs.pop("mirror", 0):
        refuse("brew.image_input: training without mirror=1 is not supported; lockstep mirrors training "
               "images at random")
    kwargs.pop("mirror", None)
    args = dict(db=reader["db"], db_type=reader["db_type"], batch_size=int(kwargs.pop("batch_size")),
                num_replicas=len(getattr(model, "_devices", [0])) * reader["num_shards"], train=0 if is_test else 1,
                record_format="datum" if kwargs.pop("use_caffe_datum", False) else "tensorprotos")
    # color's default asks for 3 channels; fashion-mnist has 1, which it gives unless color is said.
    if "color" in kwargs or reader["db"] != "fashion-mnist":
        args["num_channels"] = 3 if kwargs.pop("color", 1) else 1
    if "crop" in kwargs:
        args["image_size"] = int(kwargs.pop("crop"))
    if "scale" in kwargs:
        args["scale"] = int(kwargs.pop("scale"))
    if kwargs:
        refuse(f"brew.image_input: arguments {', '.join(sorted(kwargs))} are not supported")
    if reader["created"] is None:
        # One reader for every replica, on the host: each replica reads its own slice of each global batch.
        with core.DeviceScope(core.DeviceOption(core.CPU, 0)):
            model.param_init_net.CreateDB([], core.BlobReference(str(blob_in)), **args)
        reader["created"] = args
    elif reader["created"] != args:
        refuse(f"brew.image_input: reader {blob_in} is read with different arguments by another replica")
    return _brew.image_input(model, str(blob_in), blob_out)


def iter(model, blob_out, **kwargs):  # noqa: A001 (Caffe2's name)
    """Caffe2's iteration counter: ``blob_out`` an int64 0 from param_init_net, counted up by the net's Iter
    op at every run."""
    kwargs.pop("device_option", None)
    model.param_init_net.ConstantFill([], blob_out, shape=[1], value=0, dtype=core.DataType.INT64, **kwargs)
    return model.net.Iter(blob_out, blob_out, **kwargs)


# Caffe2 names this adapter lacks: one line naming them.
__getattr__ = missing_names("caffe2.python.brew")
