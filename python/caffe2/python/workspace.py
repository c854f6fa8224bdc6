"""Caffe2's ``workspace`` over lockstep's: one default workspace, blobs fed and fetched as numpy arrays,
nets created once and run many times in C++."""
import os

from caffe2.proto import caffe2_pb2
from caffe2.python._unsupported import missing_names
from lockstep import core
from lockstep import workspace as _workspace
from lockstep._core import C, Error
from lockstep.workspace import (  # noqa: F401 (Caffe2's names, re-exported)
    Blobs, FeedBlob, FetchBlob, FetchBlobs, GpuDeviceType, HasBlob, NumCudaDevices, NumGpuDevices, RunNetOnce,
    RunOperatorsOnce, SwitchWorkspace, Workspaces, blobs, has_gpu_support)

has_hip_support = False  # Caffe2's programs test it beside has_gpu_support

# What FileStoreHandlerCreate / RedisStoreHandlerCreate said about where the shards meet, by the handler's
# blob: data_parallel_model's rendezvous(kv_handler=...) meets there.
_store_handlers = {}


def GlobalInit(args):
    """Caffe2's process flags (``--caffe2_log_level`` and the like) set its C++ logging; lockstep logs by
    its own rules, so they change nothing."""
    return True


def _argument(op, name, default):
    for arg in op.arg:
        if arg.name == name:
            return arg.s.decode() if arg.HasField("s") else arg.i
    return default


def CurrentWorkspace():
    """The current workspace's name (Caffe2's; lockstep.workspace.CurrentWorkspace gives the workspace)."""
    return _workspace.CurrentWorkspaceName()


def ResetWorkspace(root_folder=None):
    """Drops every blob, object and net. ``root_folder``, where Caffe2's workspace kept files, is made when
    missing; no lockstep operator reads paths relative to it."""
    if root_folder:
        os.makedirs(root_folder, exist_ok=True)
    return _workspace.ResetWorkspace()


def CreateNet(net, overwrite=False, input_blobs=None):
    """Instantiates ``net``; the blobs it reads, ``input_blobs`` among them, exist afterwards (empty until
    fed), as in Caffe2."""
    return _workspace.CreateNet(net, overwrite)


def RunNet(name, num_iter=1, allow_fail=False):
    """Runs a created net; with ``allow_fail`` a failure returns False (Caffe2's) instead of raising."""
    try:
        return _workspace.RunNet(name, num_iter)
    except Error:
        if not allow_fail:
            raise
        return False


def RunOperatorOnce(operator):
    """Runs one OperatorDef (or its serialized bytes) once. A store handler's settings are remembered for
    data_parallel_model."""
    if isinstance(operator, bytes):
        operator = caffe2_pb2.OperatorDef.FromString(operator)
    where = None
    if operator.type == "FileStoreHandlerCreate":
        where = dict(file_store_path=_argument(operator, "path", ""))
    elif operator.type == "RedisStoreHandlerCreate":
        where = dict(redis_host=_argument(operator, "host", ""), redis_port=_argument(operator, "port", 6379))
    if where is not None:
        _store_handlers[operator.output[0]] = dict(where, run_id=_argument(operator, "prefix", "") or
                                                   C.RUN_ID_WITHOUT_PREFIX)
        if operator.type not in C.operator_types(core.CPU):
            return True  # a build without the op: Parallelize meets the other shards from these settings
    return _workspace.RunOperatorOnce(operator)


# Caffe2 names this adapter lacks: one line naming them.
__getattr__ = missing_names("caffe2.python.workspace")
