"""ModelHelper: a model under construction, as Caffe2's ``model_helper.ModelHelper``.

It holds ``param_init_net`` (creates the parameters) and ``net`` (computes), both lockstep NetDefs built by
the C++ core; ``net.<Operator>(inputs, outputs, **args)`` adds any registered operator.
"""
import contextlib

from lockstep import core
from lockstep._core import C, InvalidInput


class Net(core.NetDefMethods):
    """One of a model's nets. ``net.Relu("x", "y")`` adds a Relu; plain names are scoped, BlobReferences
    are used as given. Returns the output as a BlobReference, or a tuple of them for several outputs."""

    def __init__(self, model, init):
        self._model = model
        self._init = init
        self._next_name = 0
        # The message Proto() handed out, kept in step with the C++ net (see _sync): both sides'
        # serializations as of the last sync, and the message's sizes then.
        self._proto = None
        self._synced_cpp = self._synced_proto = self._synced_sizes = None

    def Proto(self):
        """The NetDef as a protobuf message (lockstep_pb2.NetDef). It stays live, as Caffe2's did: edits to
        it (``Proto().op.extend(...)``, ``external_input``, an op's arguments) reach the model before it is
        next used, and Proto() shows the ops added since."""
        from lockstep import lockstep_pb2
        if self._proto is None:
            self._synced_cpp = self._cpp_bytes()
            self._proto = lockstep_pb2.NetDef.FromString(self._synced_cpp)
            self._synced_proto, self._synced_sizes = self._proto.SerializeToString(), self._sizes()
        self._sync(full=True)
        return self._proto

    def _cpp_bytes(self):
        cpp = self._model._cpp_model
        return cpp.init_net_bytes() if self._init else cpp.net_bytes()

    def _sizes(self):
        """What adding or removing ops or external blobs changes, read without walking the net."""
        p = self._proto
        return len(p.op), len(p.external_input), len(p.external_output), len(p.arg)

    def _sync(self, full):
        """Sends edits of the handed-out message to the C++ net and brings the C++ net's changes into it.
        Every use of the C++ model sends ops added to or removed from the message (a check of its sizes);
        a full sync (Proto(), running or creating the net, Parallelize, the gradients) compares the whole
        nets, so that it also finds edits in place."""
        if self._proto is None or (not full and self._sizes() == self._synced_sizes):
            return
        edited, current = self._proto.SerializeToString(), self._cpp_bytes()
        if edited != self._synced_proto:
            if current != self._synced_cpp:
                # Edits in place, then ops that the model added (each use of the model sends the message's
                # added or removed ops first, so any found here came after the model's).
                if self._sizes() != self._synced_sizes:
                    raise InvalidInput(f"net '{self.Name()}': its Proto() was edited after ops were added to "
                                       "the model; take Proto() again after adding ops, then edit it")
                self._proto.op.extend(self._ops_added_since_sync(current))
                edited = self._proto.SerializeToString()
            self._model._cpp_model.set_net_bytes(self._init, edited)
            current = self._cpp_bytes()
        elif current != self._synced_cpp:
            self._proto.ParseFromString(current)  # in place: references the caller holds see it
        self._synced_cpp, self._synced_proto, self._synced_sizes = current, self._proto.SerializeToString(), \
            self._sizes()

    def _ops_added_since_sync(self, current):
        """The ops the model appended since the last sync, which the message edited in place lacks; other
        changes of the model's net cannot stand beside the edit."""
        from lockstep import lockstep_pb2
        before, now = lockstep_pb2.NetDef.FromString(self._synced_cpp), lockstep_pb2.NetDef.FromString(current)
        added = list(now.op[len(before.op):])
        del now.op[len(before.op):]
        if before != now:
            raise InvalidInput(f"net '{self.Name()}': its Proto() was edited while the model changed the ops it "
                               "held; take Proto() again after adding ops, then edit it")
        return added

    def Name(self):
        cpp = self._model._cpp_model
        return cpp.init_net_name if self._init else cpp.net_name

    def __str__(self):
        return self.Name()

    def __getattr__(self, op_type):
        return core.OperatorMethod(self, op_type)

    def AddOperator(self, op_type, inputs=(), outputs=None, **args):
        model = self._model
        with model.scopes():
            device = model._cpp.device
            inputs = [model._scope_name(name) for name in _as_list(inputs)]
            if outputs is None:
                outputs = 1
            if isinstance(outputs, int):
                outputs = [self._auto_name(op_type) for _ in range(outputs)]
            outputs = [model._scope_name(name) for name in _as_list(outputs)]
            model._cpp.add_op(self._init, op_type, inputs, outputs, args)
        refs = tuple(core.BlobReference(name, self) for name in outputs)
        return refs[0] if len(refs) == 1 else refs

    def _auto_name(self, op_type):
        self._next_name += 1
        return f"{self.Name()}_{op_type.lower()}_{self._next_name}"


def _as_list(names):
    if isinstance(names, str):
        return [names]
    return list(names)


class ParameterInfo:
    """A trainable parameter as Caffe2's optimizers see it: its blob, gradient (None before the backward pass),
    shape and tag. ``blob_copy`` maps a DataType to another precision's copy; lockstep keeps none (parameters
    stay float32; 16-bit casts are made in the forward pass), so it is None."""

    def __init__(self, blob, grad, shape, tag):
        self.blob, self.grad, self.shape, self.tag = blob, grad, list(shape), tag
        self.name = str(blob)
        self.blob_copy = None

    def __str__(self):
        return self.name


class ModelHelper:
    """A model: its nets, its parameters and their gradients.

    ``arg_scope`` gives default arguments of brew's layers (e.g. ``{"order": "NCHW"}``). The initial values
    of the parameters derive from ``seed`` and each parameter's name (the command line's --seed).
    """

    def __init__(self, name="model", init_params=True, arg_scope=None, seed=None):
        self._cpp_model = C.ModelHelper(name, init_params)
        # A second model of the same name gets nets of their own, as in Caffe2 (core.NextNetName).
        self._cpp_model.rename_nets(core.NextNetName(name), core.NextNetName(name + "_init"))
        if seed is not None:
            self._cpp_model.seed = seed
        self.arg_scope = dict(arg_scope or {})
        self.net = Net(self, init=False)
        self.param_init_net = Net(self, init=True)
        self.parallel = None  # the DataParallelModel, once data_parallel_model.Parallelize has built it

    @property
    def _cpp(self):
        """The C++ model, with the ops added to or removed from the nets' Proto() messages applied."""
        self._sync_nets(full=False)
        return self._cpp_model

    def _sync_nets(self, full=True):
        self.net._sync(full)
        self.param_init_net._sync(full)

    @property
    def name(self):
        """The name the model was given; its nets' names may have a suffix (net.Name())."""
        return self._cpp_model.name

    @property
    def params(self):
        """Every trainable parameter of every replica; GetParams(namescope) gives one replica's."""
        return self.GetParams("")

    def GetParams(self, namescope=None, top_scope=False):
        """The trainable parameters under ``namescope`` (default: the current name scope), e.g. "gpu_0"."""
        return self._params(namescope, ["weight", "bias"])

    def GetComputedParams(self, namescope=None):
        """Parameters that are state rather than trained (the running statistics of batch norm)."""
        return self._params(namescope, ["computed"])

    def GetAllParams(self, namescope=None):
        return self._params(namescope, [])

    def _params(self, namescope, tags):
        if namescope is None:
            namescope = core.CurrentNameScope()
        if namescope and not namescope.endswith("/"):
            namescope += "/"
        return [core.BlobReference(name) for name in self._cpp.get_params(namescope, tags)]

    def AddGradientOperators(self, losses):
        """Appends the backward pass of ``losses``; returns Caffe2's gradient map {blob: gradient blob}: for
        the parameters, for the blobs param_init_net makes that the net reads (parameters made with fills
        rather than create_param or brew, as Caffe2 programs make them too) and for the losses.
        ``param_to_grad`` keeps the parameters'."""
        made = {out for op in self.param_init_net.Proto().op for out in op.output}  # (Proto() syncs)
        read = {blob for op in self.net.Proto().op for blob in op.input}
        with self.scopes():
            grads = self._cpp.add_gradient_operators([self._scope_name(loss) for loss in _as_list(losses)],
                                                     (made & read) - set(self._cpp.params))
        return {core.BlobReference(p): core.BlobReference(g) for p, g in grads.items()}

    def GetOptimizationParamInfo(self, params=None):
        """A ParameterInfo for each trainable parameter in ``params`` (default: all of them)."""
        params = self.params if params is None else [str(p) for p in params]
        grads = self.param_to_grad
        infos = []
        for name in params:
            info = self._cpp.param_info(str(name))
            if info["tag"] != "computed":
                infos.append(ParameterInfo(core.BlobReference(name), grads.get(name), info["shape"], info["tag"]))
        return infos

    @property
    def param_to_grad(self):
        return {core.BlobReference(p): core.BlobReference(g) for p, g in self._cpp.param_to_grad.items()}

    @property
    def replica(self):
        """Which data-parallel replica is being built: {"index", "count", "devices"} (Parallelize sets it)."""
        return self._cpp.replica

    def create_param(self, param_name, shape, initializer, tags="weight"):
        """A parameter under the current scopes, filled by ``initializer = (fill_type, {args})``."""
        fill, args = initializer
        with self.scopes():
            return core.BlobReference(self._cpp.create_param(param_name, list(shape), fill, dict(args), tags))

    @contextlib.contextmanager
    def scopes(self):
        """Applies core.NameScope and core.DeviceScope to the C++ model for the ops added inside."""
        with contextlib.ExitStack() as stack:
            names = core.CurrentNameScope()
            applied = self._cpp.scoped("")  # Parallelize's replica scope, which the builders see too
            if applied and names.startswith(applied):
                names = names[len(applied):]
            if names:
                stack.enter_context(C.NameScope(self._cpp, names))
            device = core.CurrentDeviceScope()
            if device is not None:
                stack.enter_context(C.DeviceScope(self._cpp, C.Device(device.device_type, device.device_id)))
            yield

    def _scope_name(self, name):
        if isinstance(name, core.BlobReference):
            return str(name)
        return self._cpp.scoped(str(name))

    def __getattr__(self, op_type):
        # model.Scale(...), model.SoftmaxWithLoss(...): operators added to the net, as in Caffe2.
        core.OperatorMethod(self, op_type)  # an AttributeError for a name that is no operator type
        return getattr(self.net, op_type)
