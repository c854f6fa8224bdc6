"""Caffe2's ``cnn.CNNModelHelper``: a ModelHelper whose layer methods are brew's helpers."""
from caffe2.python import brew
from caffe2.python._unsupported import missing_names, refuse
from caffe2.python.model_helper import ModelHelper


class CNNModelHelper(ModelHelper):
    """``model.Conv(...)`` is ``brew.conv(model, ...)``, and so on for each layer brew has."""

    def __init__(self, order="NCHW", name=None, use_cudnn=True, cudnn_exhaustive_search=False,
                 ws_nbytes_limit=None, init_params=True, skip_sparse_optim=False, param_model=None):
        if order != "NCHW":
            refuse(f"CNNModelHelper: order={order!r} is not supported; lockstep computes in NCHW")
        super().__init__(name=name or "CNN", init_params=init_params, skip_sparse_optim=skip_sparse_optim,
                         param_model=param_model, arg_scope={"order": order})
        self.order = order


def _layer_method(helper):
    def method(self, *args, **kwargs):
        return helper(self, *args, **kwargs)

    method.__doc__ = f"brew.{helper.__name__}(model, ...)"
    return method


for _name, _helper in (("Conv", brew.conv), ("FC", brew.fc), ("Relu", brew.relu), ("MaxPool", brew.max_pool),
                       ("AveragePool", brew.average_pool), ("SpatialBN", brew.spatial_bn),
                       ("Dropout", brew.dropout), ("Sum", brew.sum), ("Accuracy", brew.accuracy),
                       ("Flatten", brew.flatten), ("ImageInput", brew.image_input), ("Iter", brew.iter)):
    setattr(CNNModelHelper, _name, _layer_method(_helper))


# Caffe2 names this adapter lacks: one line naming them.
__getattr__ = missing_names("caffe2.python.cnn")
