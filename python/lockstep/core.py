"""Scopes and blob references, as Caffe2's ``core``.

``NameScope("gpu_0")`` prefixes the blobs that layers and operators create inside it; ``DeviceScope`` places
their operators on a device. Both nest, and both add to the scopes that ``data_parallel_model.Parallelize``
sets for each replica.
"""
import contextlib
import threading

from lockstep._core import C, Error, InvalidInput, IoError  # noqa: F401 (re-exported)

CPU = 0
CUDA = 1
GPU = CUDA

_scopes = threading.local()


class DeviceOption:
    """Where operators run: a device type (CPU or CUDA) and its index."""

    def __init__(self, device_type=CPU, device_id=0):
        if device_type not in (CPU, CUDA):
            raise InvalidInput(f"unknown device type {device_type!r}; use core.CPU or core.CUDA")
        self.device_type = device_type
        self.device_id = int(device_id)

    def __eq__(self, other):
        return isinstance(other, DeviceOption) and (self.device_type, self.device_id) == (
            other.device_type, other.device_id)

    def __repr__(self):
        return f"DeviceOption({'CPU' if self.device_type == CPU else 'CUDA'}, {self.device_id})"


class BlobReference(str):
    """A blob's full name (scopes included): used as given, never scoped again."""


def CurrentNameScope():
    """The current name scope, "" or ending with "/"."""
    return "".join(getattr(_scopes, "names", []))


def CurrentDeviceScope():
    """The innermost DeviceScope's DeviceOption, or None."""
    devices = getattr(_scopes, "devices", [])
    return devices[-1] if devices else None


@contextlib.contextmanager
def NameScope(prefix, reset=False):
    """Prefixes blob names with ``prefix/`` inside the block; ``reset=True`` drops the enclosing scopes."""
    prefix = str(prefix)
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    saved = list(getattr(_scopes, "names", []))
    _scopes.names = ([] if reset else saved) + ([prefix] if prefix else [])
    try:
        yield
    finally:
        _scopes.names = saved


@contextlib.contextmanager
def DeviceScope(device_option):
    """Places the operators and parameters created inside the block on ``device_option``."""
    if not isinstance(device_option, DeviceOption):
        raise InvalidInput(f"DeviceScope takes a core.DeviceOption, got {type(device_option).__name__}")
    _scopes.devices = getattr(_scopes, "devices", []) + [device_option]
    try:
        yield
    finally:
        _scopes.devices.pop()


def ScopedName(name):
    """``name`` under the current name scope."""
    return CurrentNameScope() + name


def schema(op_type):
    """The schema of an operator type, as ``lockstep ops TYPE`` prints it: ``{"doc", "inputs", "outputs",
    "args"}``, each input and output ``{"name", "doc", "optional"}``, ``args`` maps each declared argument's
    name to ``{"type", "doc", "min", "max"}`` plus ``"default"`` where it has one."""
    return C.operator_schema(str(op_type))


def arg_defaults(op_type):
    """The declared defaults of an operator's arguments: ``{name: value}``."""
    return {name: arg["default"] for name, arg in schema(op_type)["args"].items() if "default" in arg}
