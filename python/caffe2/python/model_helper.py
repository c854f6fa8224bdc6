"""Caffe2's ``model_helper`` over lockstep's: ``ModelHelper`` with Caffe2's constructor arguments."""
from caffe2.python._unsupported import missing_names, refuse
from caffe2.python.modeling.initializers import Initializer, PseudoFP16Initializer
from lockstep import core
from lockstep import model_helper as _model_helper
from lockstep.model_helper import ParameterInfo  # noqa: F401 (re-exported)


class ModelHelper(_model_helper.ModelHelper):
    """lockstep's ModelHelper, built as Caffe2's: ``ModelHelper(name, init_params, allow_not_known_ops,
    skip_sparse_optim, param_model, arg_scope)``."""

    def __init__(self, name=None, init_params=True, allow_not_known_ops=True, skip_sparse_optim=False,
                 param_model=None, arg_scope=None, seed=None):
        if param_model is not None:
            refuse("ModelHelper(param_model=...) (sharing another model's parameters) is not supported")
        super().__init__(name=name or "model", init_params=init_params, arg_scope=arg_scope, seed=seed)
        self._readers = {}  # CreateDB's readers, created by the first brew.image_input that reads them

    def create_param(self, param_name, shape, initializer, tags=None):
        """A parameter filled by ``initializer``: Caffe2's Initializer, or lockstep's (fill type, args)."""
        if isinstance(initializer, Initializer):
            if initializer.operator_name is None:
                refuse("ModelHelper.create_param: the Initializer names no fill operator")
            if isinstance(initializer, PseudoFP16Initializer):
                refuse("ModelHelper.create_param: PseudoFP16Initializer (float16 parameters) is not supported; "
                       "lockstep keeps parameters float32")
            initializer = initializer.fill(None)
        # Caffe2's ParameterTags are "WEIGHT", "BIAS" and "COMPUTED_PARAM", alone or in a list.
        tag = str((tags[0] if tags else None) if isinstance(tags, (list, tuple)) else tags or "weight").lower()
        return super().create_param(param_name, shape, initializer, {"computed_param": "computed"}.get(tag, tag))

    def CreateDB(self, blob_out, db, db_type, **kwargs):
        """A reader of database ``db``. Its batch and image geometry come from brew.image_input, which adds
        lockstep's CreateDB to param_init_net; ``num_shards`` is the processes that share it (shard_id
        is where this one is: Parallelize knows it)."""
        unknown = sorted(set(kwargs) - {"num_shards", "shard_id"})
        if unknown:
            refuse(f"ModelHelper.CreateDB: arguments {', '.join(unknown)} are not supported")
        self._readers[str(blob_out)] = dict(db=str(db), db_type=str(db_type),
                                            num_shards=int(kwargs.get("num_shards", 1)), created=None)
        return core.BlobReference(str(blob_out))

    # Caffe2's accessors.
    def Proto(self):
        return self.net.Proto()

    def InitProto(self):
        return self.param_init_net.Proto()

    def get_name(self):
        return self.name

    @property
    def weights(self):
        return self._params("", ["weight"])

    @property
    def biases(self):
        return self._params("", ["bias"])

    def AddWeightDecay(self, weight_decay):
        from lockstep import optimizer
        optimizer.add_weight_decay(self, weight_decay)

    def __getattr__(self, name):
        if name in _CAFFE2_METHODS_NOT_HERE:
            refuse(f"ModelHelper.{name} is not supported")
        return super().__getattr__(name)


# Methods of Caffe2's ModelHelper this one lacks: a call stops the program with one line, not with an
# AttributeError that takes the name for an operator type.
_CAFFE2_METHODS_NOT_HERE = {
    "AddParameter", "ConstructInitTrainNetfromNet", "GetCompleteNet", "GetDevices", "RunAllOnGPU", "Summarize",
    "TensorProtosDBInput", "Validate", "add_param_DEPRECATED", "get_param_info", "get_param_to_grad",
}


# Caffe2 names this adapter lacks: one line naming them.
__getattr__ = missing_names("caffe2.python.model_helper")
