"""The current workspace ("default" until SwitchWorkspace), as Caffe2's ``workspace``: blobs fed and fetched
as numpy arrays, nets created once and run many times. Runs happen in the C++ core with Python's lock
released."""
import numbers

import numpy as np

from lockstep import core
from lockstep._core import C, InvalidInput

# The workspaces by name, and the current one's (Caffe2's start in "default").
_workspaces = {"default": C.Workspace()}
_current_name = "default"


def _current():
    return _workspaces[_current_name]


def _net_bytes(net):
    """A NetDef's bytes from a model_helper.Net, a lockstep_pb2.NetDef or serialized bytes."""
    if hasattr(net, "_model") and hasattr(net, "Proto"):
        net._model._sync_nets()
        cpp = net._model._cpp_model
        return cpp.init_net_bytes() if net._init else cpp.net_bytes()
    if isinstance(net, core.Net):
        return net.Proto().SerializeToString()
    if hasattr(net, "SerializeToString"):
        return net.SerializeToString()
    if isinstance(net, bytes):
        return net
    raise InvalidInput(f"expected a net (model.net, a NetDef), got {type(net).__name__}")


def _net_name(net):
    if isinstance(net, str):
        return net
    if hasattr(net, "Name"):
        return net.Name()
    if hasattr(net, "name"):
        return net.name
    raise InvalidInput(f"expected a net or its name, got {type(net).__name__}")


def FeedBlob(name, arr, device_option=None):
    """Copies ``arr`` into blob ``name`` (on ``device_option``'s device, a core.DeviceOption or a DeviceOption
    message; host memory by default)."""
    if not isinstance(name, str) or not name:
        raise InvalidInput(f"FeedBlob: the blob's name is {name!r}; pass a non-empty string")
    device = None
    if device_option is not None:
        device_option = core.DeviceOption.of(device_option)
        device = C.Device(device_option.device_type, device_option.device_id)
    try:
        _current().feed(str(name), np.asarray(arr), device)
    except InvalidInput as e:
        raise InvalidInput(f"FeedBlob '{name}': {e}") from None
    return True


def FetchBlob(name, copy=True):
    """The blob's value as a numpy array. With ``copy=False`` a read-only view of a host blob's own buffer
    (no copy): later runs of the net overwrite what it shows, and it keeps the shape and dtype it was fetched
    with (fetch again after a write that changes them)."""
    return _current().fetch(str(name), copy)


def FetchBlobs(names):
    return [FetchBlob(name) for name in names]


def HasBlob(name):
    return _current().has_blob(str(name))


def Blobs():
    return _current().blobs()


def RunNetOnce(net):
    """Instantiates and runs ``net`` once (an init net)."""
    _current().run_net_once(_net_bytes(net))
    return True


def RunOperatorOnce(operator):
    """Runs one OperatorDef (core.CreateOperator) once, as a net of that operator alone."""
    return RunOperatorsOnce([operator])


def RunOperatorsOnce(operators):
    return RunNetOnce(core.lockstep_pb2.NetDef(name="operators", op=operators))


def CreateNet(net, overwrite=False):
    """Instantiates ``net``'s operators once; RunNet then only runs them. Returns the net's name."""
    return _current().create_net(_net_bytes(net), overwrite)


def RunNet(name, num_iter=1):
    """Runs a created net ``num_iter`` times (the loop runs in C++)."""
    if not isinstance(num_iter, numbers.Integral) or isinstance(num_iter, bool) or num_iter < 1:
        raise InvalidInput(f"RunNet: num_iter must be a whole number of at least 1, got {num_iter!r}")
    _current().run_net(_net_name(name), int(num_iter))
    return True


def NumCudaDevices():
    """The CUDA GPUs this build and machine can use (0 without CUDA)."""
    return C.cuda_device_count()


NumGpuDevices = NumCudaDevices


# Whether this machine has a CUDA GPU that lockstep can use, and the device type of GPUs (Caffe2's constants).
has_gpu_support = NumCudaDevices() > 0
GpuDeviceType = core.CUDA


def ResetWorkspace():
    """Drops every blob, object and net of the current workspace."""
    _workspaces[_current_name] = C.Workspace()
    return True


def CurrentWorkspace():
    """The current C++ workspace (for lockstep's own modules: checkpoints, shards)."""
    return _current()


def CurrentWorkspaceName():
    """The current workspace's name: "default" until SwitchWorkspace."""
    return _current_name


def SwitchWorkspace(name, create_if_missing=False):
    """Makes workspace ``name`` the current one, as Caffe2's: the others keep their blobs and nets. A name not
    used before needs ``create_if_missing``."""
    global _current_name
    if not isinstance(name, str) or not name:
        raise InvalidInput(f"SwitchWorkspace: a workspace name is a non-empty string, got {name!r}")
    if name not in _workspaces:
        if not create_if_missing:
            raise InvalidInput(f"SwitchWorkspace: no workspace '{name}' (there are {', '.join(_workspaces)}); pass "
                               "create_if_missing=True to make it")
        _workspaces[name] = C.Workspace()
    _current_name = name
    return True


def Workspaces():
    """The names of the workspaces."""
    return list(_workspaces)


class _BlobDict:
    """``workspace.blobs``: the current workspace's blobs as a mapping, as Caffe2's (``blobs["x"] = array``
    feeds, ``blobs["x"]`` fetches a copy)."""

    def __getitem__(self, name):
        return FetchBlob(name)

    def __setitem__(self, name, value):
        FeedBlob(name, value)

    def __contains__(self, name):
        return HasBlob(name)

    def __iter__(self):
        return iter(Blobs())

    def __len__(self):
        return len(Blobs())


blobs = _BlobDict()


__all__ = ["FeedBlob", "FetchBlob", "FetchBlobs", "HasBlob", "Blobs", "RunNetOnce", "RunOperatorOnce",
           "RunOperatorsOnce", "CreateNet", "RunNet", "ResetWorkspace", "CurrentWorkspace", "CurrentWorkspaceName",
           "SwitchWorkspace", "Workspaces", "blobs", "NumCudaDevices",
           "NumGpuDevices", "has_gpu_support", "GpuDeviceType"]
