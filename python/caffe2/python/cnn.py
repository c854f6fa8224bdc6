"""Caffe2's ``cnn.CNNModelHelper``: a ModelHelper whose layer methods are brew's helpers."""
from caffe2.python import brew
from caffe2.python._unsupported import refuse
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

    def Conv(self, *args, **kwargs):
        return brew.conv(self, *args, **kwargs)

    def FC(self, *args, **kwargs):
        return brew.fc(self, *args, **kwargs)

    def Relu(self, *args, **kwargs):
        return brew.relu(self, *args, **kwargs)

    def MaxPool(self, *args, **kwargs):
        return brew.max_pool(self, *args, **kwargs)

    def AveragePool(self, *args, **kwargs):
        return brew.average_pool(self, *args, **kwargs)

    def SpatialBN(self, *args, **kwargs):
        return brew.spatial_bn(self, *args, **kwargs)

    def Dropout(self, *args, **kwargs):
        return brew.dropout(self, *args, **kwargs)

    def Sum(self, *args, **kwargs):
        return brew.sum(self, *args, **kwargs)

    def Accuracy(self, *args, **kwargs):
        return brew.accuracy(self, *args, **kwargs)

    def Flatten(self, *args, **kwargs):
        return brew.flatten(self, *args, **kwargs)

    def ImageInput(self, *args, **kwargs):
        return brew.image_input(self, *args, **kwargs)
