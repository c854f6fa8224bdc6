"""Scopes and blob references, as Caffe2's ``core``.

``NameScope("gpu_0")`` prefixes the blobs that layers and operators create inside it; ``DeviceScope`` places
their operators on a device. Both nest, and both add to the scopes that ``data_parallel_model.Parallelize``
sets for each replica.
"""
import contextlib
import difflib
import functools
import math
import numbers
import sys
import threading

import numpy as np

from lockstep import lockstep_pb2
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

    @staticmethod
    def of(option):
        """A DeviceOption from itself or a protobuf DeviceOption message (lockstep_pb2, caffe2_pb2)."""
        if isinstance(option, DeviceOption):
            return option
        if hasattr(option, "device_type") and hasattr(option, "SerializeToString"):
            return DeviceOption(option.device_type, option.device_id)
        raise InvalidInput(f"expected a core.DeviceOption or a DeviceOption message, got {type(option).__name__}")

    def proto(self):
        """This device as a lockstep_pb2.DeviceOption message (what an OperatorDef holds)."""
        return lockstep_pb2.DeviceOption(device_type=self.device_type, device_id=self.device_id)

    def __eq__(self, other):
        return isinstance(other, DeviceOption) and (self.device_type, self.device_id) == (
            other.device_type, other.device_id)

    def __repr__(self):
        return f"DeviceOption({'CPU' if self.device_type == CPU else 'CUDA'}, {self.device_id})"


class BlobReference(str):
    """A blob's full name (scopes included): used as given, never scoped again. Adding a string to it gives
    a BlobReference, as in Caffe2 (``p + "_momentum"`` names the blob beside ``p``, in its scope). One that a
    net's operator returned adds operators to that net, reading it first, as Caffe2's did:
    ``x.FC([w, b], "y")`` is ``net.FC([x, w, b], "y")``."""

    def __new__(cls, name, net=None):
        ref = super().__new__(cls, name)
        ref._from_net = net
        return ref

    def __getattr__(self, op_type):
        net = self.__dict__.get("_from_net")
        if op_type.startswith("_") or net is None:
            raise AttributeError(f"BlobReference '{self}' has no attribute {op_type!r}")

        def add(inputs=(), *args, **kwargs):
            others = [inputs] if isinstance(inputs, str) else list(inputs)
            return getattr(net, op_type)([self] + others, *args, **kwargs)
        return add

    def Net(self):
        return self._from_net

    def GetNameScope(self):
        return self[:self.rfind("/") + 1]

    def GetUnscopedName(self):
        return self[self.rfind("/") + 1:]

    def __add__(self, other):
        return BlobReference(str.__add__(self, _name_part(other)))

    def __radd__(self, other):
        return BlobReference(_name_part(other) + str(self))


def _name_part(other):
    if not isinstance(other, str):
        raise TypeError(f"a BlobReference adds strings only, not {type(other).__name__}")
    return str(other)


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
    """Places the operators and parameters created inside the block on ``device_option`` (a DeviceOption or
    a DeviceOption message)."""
    _scopes.devices = getattr(_scopes, "devices", []) + [DeviceOption.of(device_option)]
    try:
        yield
    finally:
        _scopes.devices.pop()


def ScopedName(name):
    """``name`` under the current name scope."""
    return CurrentNameScope() + name


# Caffe2 operators whose work lockstep does with a function instead.
_DONE_BY_FUNCTIONS = {
    "Save": "lockstep.checkpoint.save (or Caffe2's predictor_exporter.save_to_db)",
    "Load": "lockstep.checkpoint.load (or Caffe2's predictor_exporter.load_from_db)",
}


@functools.lru_cache(maxsize=None)
def _operator_types():
    return frozenset(C.schema_types())


def OperatorMethod(owner, op_type):
    """``owner.Relu(inputs, outputs, **args)``: owner.AddOperator("Relu", ...). A name that is no operator type
    is an AttributeError, as in Caffe2 (so that a misspelled method fails where it is called)."""
    if op_type.startswith("_"):
        raise AttributeError(op_type)
    if op_type not in _operator_types():
        close = difflib.get_close_matches(op_type, sorted(_operator_types()), n=3)
        hint = f"; did you mean {' or '.join(close)}?" if close else "; `lockstep ops` lists the operators"
        if op_type in _DONE_BY_FUNCTIONS:
            hint = f"; lockstep does that with {_DONE_BY_FUNCTIONS[op_type]}"
        raise AttributeError(f"{type(owner).__name__} has no attribute or operator type '{op_type}'{hint}")
    return lambda inputs=(), outputs=None, **kwargs: owner.AddOperator(op_type, inputs, outputs, **kwargs)


def schema(op_type):
    """The schema of an operator type, as ``lockstep ops TYPE`` prints it: ``{"doc", "inputs", "outputs",
    "args"}``, each input and output ``{"name", "doc", "optional"}``, ``args`` maps each declared argument's
    name to ``{"type", "doc", "min", "max"}`` plus ``"default"`` where it has one."""
    return C.operator_schema(str(op_type))


def arg_defaults(op_type):
    """The declared defaults of an operator's arguments: ``{name: value}``."""
    return {name: arg["default"] for name, arg in schema(op_type)["args"].items() if "default" in arg}


def ScopedBlobReference(name):
    """``name`` under the current name scope, as a BlobReference."""
    return BlobReference(ScopedName(str(name)))


# TensorProto.DataType's values by name (DataType.FLOAT, DataType.INT32, ...): the ``dtype`` of fills.
DataType = lockstep_pb2.TensorProto.DataType


_FLOAT32_MAX = float(np.finfo(np.float32).max)


def MakeArgument(name, value):
    """An Argument message: an int or bool as ``i``, a float as ``f``, a string as ``s``, a NetDef as ``n`` and
    lists of them as ``ints``, ``floats``, ``strings``, ``nets``."""
    if isinstance(value, (np.ndarray, np.generic)):  # as Caffe2: an array flattened, a numpy scalar as Python's
        value = value.flatten().tolist() if value.ndim > 0 else value.item()
    arg = lockstep_pb2.Argument(name=name)
    values = list(value) if isinstance(value, (list, tuple)) else None

    def single(v):  # a float32, as the message holds it; a value it cannot hold is refused, not made inf
        if math.isfinite(v) and abs(v) > _FLOAT32_MAX:
            raise InvalidInput(f"argument {name}: {v!r} is beyond float32's range (about 3.4e38)")
        return float(v)

    if values is None:
        if isinstance(value, (bool, numbers.Integral)):
            arg.i = int(value)
        elif isinstance(value, numbers.Real):
            arg.f = single(value)
        elif isinstance(value, (str, bytes)):
            arg.s = value.encode() if isinstance(value, str) else value
        elif hasattr(value, "SerializeToString") and hasattr(value, "op"):
            arg.n.CopyFrom(value)
        else:
            raise InvalidInput(f"argument {name}: cannot hold a {type(value).__name__} ({value!r})")
    elif all(isinstance(v, (bool, numbers.Integral)) for v in values):
        arg.ints.extend(int(v) for v in values)
    elif all(isinstance(v, numbers.Real) for v in values):
        arg.floats.extend(single(v) for v in values)
    elif all(isinstance(v, (str, bytes)) for v in values):
        arg.strings.extend(v.encode() if isinstance(v, str) else v for v in values)
    elif all(hasattr(v, "op") for v in values):
        arg.nets.extend(values)
    else:
        raise InvalidInput(f"argument {name}: a list of ints, floats, strings or nets, got {value!r}")
    return arg


def _names(blobs):
    if blobs is None:
        return []
    return [str(blobs)] if isinstance(blobs, str) else [str(b) for b in blobs]


def _scoped(blobs):
    """Blob names under the current name scope; BlobReferences as given."""
    blobs = [blobs] if isinstance(blobs, str) else list(blobs)
    return [blob if isinstance(blob, BlobReference) else ScopedName(str(blob)) for blob in blobs]


def CreateOperator(operator_type, inputs, outputs, name="", control_input=None, device_option=None, arg=None,
                   engine=None, **kwargs):
    """An OperatorDef message. Names are used as given; the device is ``device_option`` or the current
    DeviceScope's; keyword arguments become Arguments (MakeArgument), after the Argument messages of ``arg``."""
    op = lockstep_pb2.OperatorDef(type=operator_type)
    if name:
        op.name = name
    op.input.extend(_names(inputs))
    op.output.extend(_names(outputs))
    op.control_input.extend(_names(control_input))
    device = device_option if device_option is not None else CurrentDeviceScope()
    if device is not None:
        op.device_option.CopyFrom(DeviceOption.of(device).proto())
    if engine:
        op.engine = engine
    op.arg.extend(arg or [])
    op.arg.extend(MakeArgument(key, value) for key, value in kwargs.items() if value is not None)
    return op


# The names given to nets in this process, and how often each was asked for (Caffe2's
# Net._net_names_used_counters).
_net_names = set()
_net_name_uses = {}


def NextNetName(basename):
    """``basename`` the first time, then ``basename_1``, ``basename_2``... (skipping names given already, as
    "a_1" asked for itself): every net of a process has a name of its own, as in Caffe2, so a second model or
    net of the same name can be created beside the first."""
    uses = _net_name_uses.get(basename, 0)
    name = basename if uses == 0 else f"{basename}_{uses}"
    while name in _net_names:
        uses += 1
        name = f"{basename}_{uses}"
    _net_name_uses[basename] = uses + 1
    _net_names.add(name)
    return name


class NetDefMethods:
    """Caffe2's Net methods that read or edit the NetDef, through Proto(): the same on a standalone Net and on
    a model's nets."""

    def BlobIsDefined(self, blob):
        """Whether an operator writes ``blob`` or it is an external input."""
        net, name = self.Proto(), str(blob)
        return name in net.external_input or any(name in op.output for op in net.op)

    def UsesBlob(self, blob):
        """Whether an operator reads ``blob`` or it is an external input."""
        net, name = self.Proto(), str(blob)
        return name in net.external_input or any(name in op.input for op in net.op)

    def UsedBlobNames(self):
        net = self.Proto()
        names = set(net.external_input) | set(net.external_output)
        for op in net.op:
            names.update(op.input)
            names.update(op.output)
        return names

    def GetBlobRef(self, blob_name):
        if not self.BlobIsDefined(blob_name):
            raise KeyError(f"Net does not define blob {blob_name}")
        return BlobReference(str(blob_name), self)

    def AddExternalInput(self, *inputs):
        """Lists blobs that the net reads from outside it (fed, or another net's); returns their references."""
        net, names = self.Proto(), [str(blob) for blob in inputs]
        if not names:
            raise InvalidInput(f"net '{self.Name()}': AddExternalInput needs at least one blob")
        for index, name in enumerate(names):
            if name in net.external_input or name in names[:index]:
                raise InvalidInput(f"net '{self.Name()}' already has an external input named {name}")
        net.external_input.extend(names)
        refs = tuple(BlobReference(name, self) for name in names)
        return refs[0] if len(refs) == 1 else refs

    def AddExternalOutput(self, *outputs):
        """Lists blobs that the net writes for others to read; each must be written by the net."""
        undefined = [str(blob) for blob in outputs if not self.BlobIsDefined(blob)]
        if undefined:
            raise InvalidInput(f"net '{self.Name()}': AddExternalOutput: no operator writes {', '.join(undefined)}")
        self.Proto().external_output.extend(str(blob) for blob in outputs)
        return outputs[0] if len(outputs) == 1 else outputs

    def AppendNet(self, net, device_option=None):
        """Appends ``net``'s operators (on ``device_option`` when given) and its external blobs that this net
        neither lists nor writes."""
        mine, theirs = self.Proto(), net.Proto()
        written = {blob for op in mine.op for blob in op.output}
        inputs = [blob for blob in theirs.external_input if blob not in mine.external_input and blob not in written]
        outputs = [blob for blob in theirs.external_output if blob not in mine.external_output]
        mine.external_input.extend(inputs)
        mine.external_output.extend(outputs)
        ops = [lockstep_pb2.OperatorDef.FromString(op.SerializeToString()) for op in theirs.op]
        if device_option is not None:
            for op in ops:
                op.device_option.CopyFrom(DeviceOption.of(device_option).proto())
        mine.op.extend(ops)
        return self

    def Clone(self, name, blob_remap=None, op_id_mask=None, remap_funcs=None, keep_schema=True,
              update_external_list=False):
        """A standalone copy named ``name`` (made unique as every net's name) of the operators ``op_id_mask``
        lists (default all), each blob renamed by ``blob_remap``; with ``update_external_list`` its external
        inputs are the blobs it reads before writing and its outputs those it writes and does not read."""
        if remap_funcs:
            raise InvalidInput("Clone: remap_funcs (for RecurrentNetwork's step nets) is not supported; lockstep "
                               "has no operator with nets in its arguments")
        remap = {str(old): str(new) for old, new in (blob_remap or {}).items()}
        source = self.Proto()
        clone = lockstep_pb2.NetDef()
        clone.CopyFrom(source)
        clone.name = name
        del clone.op[:]
        for index in (range(len(source.op)) if op_id_mask is None else op_id_mask):
            op = clone.op.add()
            op.CopyFrom(source.op[index])
            op.input[:] = [remap.get(blob, blob) for blob in op.input]
            op.output[:] = [remap.get(blob, blob) for blob in op.output]
        clone.external_input[:] = [remap.get(blob, blob) for blob in clone.external_input]
        clone.external_output[:] = [remap.get(blob, blob) for blob in clone.external_output]
        if update_external_list:
            written, read_after = set(), set()
            del clone.external_input[:]
            for op in clone.op:
                for blob in op.input:
                    if blob in written:
                        read_after.add(blob)
                    elif blob not in clone.external_input:
                        clone.external_input.append(blob)
                written.update(op.output)
            clone.external_output[:] = sorted(written - read_after)
        return Net(clone)


class Net(NetDefMethods):
    """A NetDef built from Python, outside any model: ``Net("init")`` or ``Net(netdef)`` (a copy).
    ``net.ConstantFill([], "x", shape=[2], value=1.0)`` appends an operator (plain names under the current
    name scope, BlobReferences as given) and returns its outputs. workspace.RunNetOnce / CreateNet take it.
    A name used before gets a suffix (NextNetName), a copy's too."""

    def __init__(self, name_or_proto):
        proto = lockstep_pb2.NetDef()
        if isinstance(name_or_proto, str):
            proto.name = name_or_proto
        elif hasattr(name_or_proto, "Proto"):
            proto.CopyFrom(name_or_proto.Proto())
        else:
            proto.CopyFrom(name_or_proto)
        proto.name = NextNetName(proto.name)
        self._net = proto
        self._next_name = 0

    def Proto(self):
        return self._net

    def Name(self):
        return self._net.name

    def __str__(self):
        return self.Name()

    def _output_name(self, op_type):
        self._next_name += 1
        return ScopedName(f"{self.Name()}_{op_type.lower()}_{self._next_name}")

    def AddOperator(self, op_type, inputs=(), outputs=None, **kwargs):
        if outputs is None:
            outputs = 1
        if isinstance(outputs, int):
            outputs = [BlobReference(self._output_name(op_type)) for _ in range(outputs)]
        op = CreateOperator(op_type, _scoped(inputs), _scoped(outputs), **kwargs)
        self._net.op.extend([op])
        refs = tuple(BlobReference(name, self) for name in op.output)
        return refs[0] if len(refs) == 1 else refs

    def AddGradientOperators(self, losses):
        """Appends the backward pass of ``losses`` (each seeded with a gradient of 1); returns Caffe2's gradient
        map {blob: gradient blob} for every blob the net's operators read that the losses depend on."""
        losses = [str(loss) for loss in ([losses] if isinstance(losses, str) else losses)]
        read = {blob for op in self._net.op for blob in op.input}
        net, grads = C.add_gradient_operators_to_net(self._net.SerializeToString(), losses, read)
        self._net.ParseFromString(net)
        return {BlobReference(blob, self): BlobReference(grad, self) for blob, grad in grads.items()}

    def __getattr__(self, op_type):
        return OperatorMethod(self, op_type)

    def RunAllOnGPU(self, gpu_id=0, use_cudnn=False):
        """Places every operator on CUDA device ``gpu_id`` (lockstep picks cuDNN on CUDA devices itself); where
        there is no GPU they stay where they are, as Parallelize_GPU then uses CPU devices."""
        if C.cuda_device_count() == 0:
            print(f"lockstep: no CUDA GPU here; net {self.Name()} runs where its operators are", file=sys.stderr)
            return
        for op in self._net.op:
            op.device_option.CopyFrom(DeviceOption(CUDA, gpu_id).proto())

    def RunAllOnCPU(self):
        for op in self._net.op:
            op.device_option.CopyFrom(DeviceOption(CPU, 0).proto())
