"""Caffe2's ``predictor_exporter`` over lockstep's checkpoints: ``save_to_db`` writes one safetensors file
(lockstep's checkpoint format, checksummed, written atomically) holding the parameters under their full
names and the MetaNetDef (prediction net, its init nets, the input, output and parameter names);
``load_from_db`` reads it back into the workspace and returns the MetaNetDef. Caffe2's ``db_type``
("minidb", "log_file_db", ...) names its own database formats; lockstep's file is the same for each."""
import collections
import json
import struct

import numpy as np

from caffe2.python._unsupported import missing_names
from caffe2.python.predictor import predictor_py_utils as utils
from caffe2.python.predictor_constants import predictor_constants
from lockstep import core, workspace
from lockstep._core import C

# Caffe2's optimizers count iterations in "optimizer_iteration"; a saved model holds lockstep's counter under
# that name too, so programs that read it after loading find it.
_ITERATION_NAME = "optimizer_iteration"

_NUMPY_DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I32": np.int32, "I64": np.int64,
                 "U8": np.uint8, "I8": np.int8, "BOOL": np.bool_}


class PredictorExportMeta(collections.namedtuple(
        "PredictorExportMeta", "predict_net, parameters, inputs, outputs, shapes, name, extra_init_net, "
                               "net_type, num_workers")):
    """What save_to_db writes: the prediction net, its parameters, inputs and outputs (names), and the
    shapes of the inputs and outputs."""

    def __new__(cls, predict_net, parameters, inputs, outputs, shapes=None, name="", extra_init_net=None,
                net_type=None, num_workers=None):
        inputs, outputs, parameters = ([str(b) for b in blobs] for blobs in (inputs, outputs, parameters))
        if extra_init_net is not None:
            raise core.InvalidInput("PredictorExportMeta: extra_init_net is not supported")
        if hasattr(predict_net, "Proto"):
            predict_net = predict_net.Proto()
        overlap = set(parameters) & (set(inputs) | set(outputs))
        if overlap:
            raise core.InvalidInput(f"PredictorExportMeta: {', '.join(sorted(overlap))} are parameters and also "
                                    "inputs or outputs")
        return super().__new__(cls, predict_net, parameters, inputs, outputs, dict(shapes or {}), name, None,
                               net_type, num_workers)


# inputs_name() ... predict_net_name(): the MetaNetDef keys of the export's blob lists and nets.
for _method, _key in (("inputs_name", "INPUTS_BLOB_TYPE"), ("outputs_name", "OUTPUTS_BLOB_TYPE"),
                      ("parameters_name", "PARAMETERS_BLOB_TYPE"), ("global_init_name", "GLOBAL_INIT_NET_TYPE"),
                      ("predict_init_name", "PREDICT_INIT_NET_TYPE"), ("predict_net_name", "PREDICT_NET_TYPE")):
    setattr(PredictorExportMeta, _method,
            lambda self, key=getattr(predictor_constants, _key): utils.get_comp_name(key, self.name))


def get_meta_net_def(predictor_export_meta, ws=None):
    """The MetaNetDef of an export. Its global init net is empty: load_from_db has loaded the parameters."""
    meta = utils.MetaNetDef()
    utils.AddNet(meta, predictor_export_meta.predict_init_name(),
                 utils.create_predict_init_net(ws, predictor_export_meta))
    utils.AddNet(meta, predictor_export_meta.global_init_name(), core.Net("global-init").Proto())
    utils.AddNet(meta, predictor_export_meta.predict_net_name(), utils.create_predict_net(predictor_export_meta))
    utils.AddBlobs(meta, predictor_export_meta.parameters_name(), predictor_export_meta.parameters)
    utils.AddBlobs(meta, predictor_export_meta.inputs_name(), predictor_export_meta.inputs)
    utils.AddBlobs(meta, predictor_export_meta.outputs_name(), predictor_export_meta.outputs)
    return meta


def _iteration_blob(net):
    for op in net.op:
        if op.type == "Iter":
            return op.output[0]
    return None


def save_to_db(db_type, db_destination, predictor_export_meta):
    """Writes the parameters and the MetaNetDef to ``db_destination`` (one file, whatever ``db_type``)."""
    meta = get_meta_net_def(predictor_export_meta)
    workspace.FeedBlob(predictor_constants.META_NET_DEF, np.frombuffer(meta.SerializeToString(), np.uint8))
    names = [predictor_constants.META_NET_DEF] + list(predictor_export_meta.parameters)
    iteration = _iteration_blob(predictor_export_meta.predict_net)
    if iteration in predictor_export_meta.parameters and _ITERATION_NAME not in names:
        workspace.FeedBlob(_ITERATION_NAME, workspace.FetchBlob(iteration))
        names.append(_ITERATION_NAME)
    state = dict(model=predictor_export_meta.predict_net.name, epochs_done=0, iteration=0, epoch_iteration=0,
                 reader_position=0, seed=0, images_trained=0, training_milliseconds=0, num_channels=0,
                 image_size=0, num_labels=0)
    C.save_checkpoint(str(db_destination), workspace.CurrentWorkspace(), "", names, state)


def _tensors(path):
    """{name: (numpy dtype, shape)} from a safetensors file's header."""
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    return {name: (_NUMPY_DTYPES[t["dtype"]], t["shape"]) for name, t in header.items() if name != "__metadata__"}


def load_from_db(filename, db_type, device_option=None):
    """Loads every blob of the file into the workspace (blobs that exist keep their place and must have the
    saved shapes) and returns its MetaNetDef; ``device_option`` is put on the operators of its nets."""
    tensors = _tensors(filename)
    for name, (dtype, shape) in tensors.items():
        if not workspace.HasBlob(name):
            workspace.FeedBlob(name, np.zeros(shape, dtype))
    C.load_checkpoint(str(filename), workspace.CurrentWorkspace(), "", list(tensors))
    meta = utils.MetaNetDef.FromString(workspace.FetchBlob(predictor_constants.META_NET_DEF).tobytes())
    device_option = device_option if device_option is not None else core.CurrentDeviceScope()
    if device_option is not None:
        for entry in meta.nets:
            for op in entry.value.op:
                op.device_option.CopyFrom(core.DeviceOption.of(device_option).proto())
    return meta


def prepare_prediction_net(filename, db_type, device_option=None):
    """Loads a saved predictor, runs its init nets and creates its prediction net; returns that net."""
    meta = load_from_db(filename, db_type, device_option)
    workspace.RunNetOnce(utils.GetNet(meta, predictor_constants.GLOBAL_INIT_NET_TYPE))
    workspace.RunNetOnce(utils.GetNet(meta, predictor_constants.PREDICT_INIT_NET_TYPE))
    predict_net = core.Net(utils.GetNet(meta, predictor_constants.PREDICT_NET_TYPE))
    workspace.CreateNet(predict_net)
    return predict_net


# Caffe2 names this adapter lacks: one line naming them.
__getattr__ = missing_names("caffe2.python.predictor.predictor_exporter")
