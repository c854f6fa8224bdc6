"""Caffe2's ``predictor_py_utils``: a MetaNetDef's nets and blob lists by key, and the nets a saved
predictor holds."""
import base64
import json

from caffe2.python._unsupported import missing_names
from lockstep import core
from lockstep.lockstep_pb2 import NetDef


class _Entry:
    def __init__(self, key, value):
        self.key, self.value = key, value


class MetaNetDef:
    """Caffe2's MetaNetDef: ``nets`` and ``blobs``, lists of entries with ``key`` and ``value`` (a NetDef,
    a list of blob names). It travels as JSON with the nets' serialized bytes."""

    def __init__(self):
        self.nets, self.blobs = [], []

    def SerializeToString(self):
        return json.dumps({
            "nets": [[e.key, base64.b64encode(e.value.SerializeToString()).decode()] for e in self.nets],
            "blobs": [[e.key, list(e.value)] for e in self.blobs]}).encode()

    @staticmethod
    def FromString(data):
        meta, parsed = MetaNetDef(), json.loads(bytes(data).decode())
        meta.nets = [_Entry(key, NetDef.FromString(base64.b64decode(net))) for key, net in parsed["nets"]]
        meta.blobs = [_Entry(key, list(blobs)) for key, blobs in parsed["blobs"]]
        return meta


def _get(entries, key):
    for entry in entries:
        if entry.key == key:
            return entry.value
    return None


def GetNet(meta_net_def, key):
    return _get(meta_net_def.nets, key)


def GetBlobs(meta_net_def, key):
    return _get(meta_net_def.blobs, key) or []


def AddNet(meta_net_def, net_name, net_def):
    meta_net_def.nets.append(_Entry(net_name, net_def))


def AddBlobs(meta_net_def, blob_name, blob_def):
    blobs = _get(meta_net_def.blobs, blob_name)
    if blobs is None:
        blobs = []
        meta_net_def.blobs.append(_Entry(blob_name, blobs))
    blobs.extend(str(blob) for blob in blob_def)


def get_comp_name(string, name):
    return f"{string}_{name}" if name else string


def create_predict_net(predictor_export_meta):
    """The prediction net: the exported net's operators, its inputs and parameters as external inputs."""
    net = NetDef(name=predictor_export_meta.predict_net.name or "predict")
    net.op.extend(predictor_export_meta.predict_net.op)
    net.external_input.extend(predictor_export_meta.inputs + predictor_export_meta.parameters)
    net.external_output.extend(predictor_export_meta.outputs)
    return net


def create_predict_init_net(ws, predictor_export_meta):
    """A net that zero-fills the inputs and outputs, with the shapes given (else their current shapes)."""
    from lockstep import workspace

    net = core.Net("predict-init")
    for blob in predictor_export_meta.inputs + predictor_export_meta.outputs:
        shape = predictor_export_meta.shapes.get(blob)
        if shape is None:
            if not workspace.HasBlob(blob):
                raise core.InvalidInput(f"predictor export: no shape for {blob}, which is not in the workspace; "
                                        "give it in shapes")
            shape = workspace.FetchBlob(blob).shape
        net.Proto().op.extend([core.CreateOperator("ConstantFill", [], [blob], shape=list(shape), value=0.0)])
    net.Proto().external_input.extend(predictor_export_meta.inputs + predictor_export_meta.outputs)
    return net.Proto()


# Caffe2 names this adapter lacks: one line naming them.
__getattr__ = missing_names("caffe2.python.predictor.predictor_py_utils")
