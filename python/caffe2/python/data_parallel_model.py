"""Caffe2's ``data_parallel_model`` over lockstep's: ``Parallelize`` with Caffe2's keyword arguments and
rendezvous dict, and the helpers Caffe2 programs call around it."""
import copy

from caffe2.proto import caffe2_pb2
from caffe2.python import workspace
from caffe2.python._unsupported import missing_names, refuse
from lockstep import core
from lockstep import data_parallel_model as _dpm
from lockstep.data_parallel_model import (  # noqa: F401 (re-exported)
    FinalizeAfterCheckpoint, GetCheckpointParams, GetDeviceScopes, GetDeviceType, GetLearningRateBlobNames)

_RENDEZVOUS_KEYS = ("kv_handler", "shard_id", "num_shards", "engine", "transport", "interface", "exit_nets",
                    "mpi_rendezvous")


def _rendezvous(rendezvous, barrier_net_timeout_sec):
    """lockstep's rendezvous options from Caffe2's dict, whose kv_handler is the blob a
    FileStoreHandlerCreate or RedisStoreHandlerCreate op wrote (workspace.RunOperatorOnce)."""
    if rendezvous is None:
        return None
    unknown = sorted(set(rendezvous) - set(_RENDEZVOUS_KEYS))
    if unknown:
        refuse(f"data_parallel_model.Parallelize: unknown rendezvous keys {', '.join(unknown)}")
    if rendezvous.get("mpi_rendezvous"):
        refuse("rendezvous through MPI (mpi_rendezvous) is not supported; meet through a FileStoreHandlerCreate "
               "or RedisStoreHandlerCreate kv_handler (mpirun still gives each process its shard)")
    options = dict(num_shards=int(rendezvous["num_shards"]), shard_id=int(rendezvous["shard_id"]),
                   engine=rendezvous.get("engine", "GLOO"), transport=rendezvous.get("transport", "tcp"))
    if rendezvous.get("interface"):
        options["interface"] = rendezvous["interface"]
    if barrier_net_timeout_sec is not None:
        options["first_iter_timeout"] = barrier_net_timeout_sec
    handler = rendezvous.get("kv_handler")
    if options["num_shards"] > 1:
        if handler is None:
            refuse("rendezvous without kv_handler: create one with FileStoreHandlerCreate or "
                   "RedisStoreHandlerCreate (workspace.RunOperatorOnce) and pass its blob")
        if str(handler) not in workspace._store_handlers:
            refuse(f"rendezvous kv_handler '{handler}' was not made by a FileStoreHandlerCreate or "
                   "RedisStoreHandlerCreate run through workspace.RunOperatorOnce")
        options.update(workspace._store_handlers[str(handler)])
    return options


def Parallelize(model_helper_obj, input_builder_fun, forward_pass_builder_fun, param_update_builder_fun=None,
                optimizer_builder_fun=None, post_sync_builder_fun=None, pre_grad_net_transformer_fun=None,
                net_transformer_fun=None, devices=None, rendezvous=None, net_type="dag",
                broadcast_computed_params=True, optimize_gradient_memory=False, dynamic_memory_management=False,
                blobs_to_keep=None, use_nccl=False, max_concurrent_distributed_ops=None, cpu_device=False,
                num_threads_per_device=None, shared_model=False, combine_spatial_bn=False,
                barrier_net_timeout_sec=None, **lockstep_options):
    """lockstep's Parallelize (lockstep.data_parallel_model.Parallelize documents it) with Caffe2's
    arguments. Memory is planned by liveness always, so optimize_gradient_memory and
    dynamic_memory_management change nothing; barrier_net_timeout_sec bounds the shards' first meeting."""
    scope = core.CurrentDeviceScope()
    assert scope is None or scope.device_type == core.CPU, \
        f"Parallelize must be called without device-scope, device scope was: {scope}"  # Caffe2's check
    if pre_grad_net_transformer_fun is not None or net_transformer_fun is not None:
        refuse("data_parallel_model.Parallelize: net transformer functions are not supported; lockstep builds "
               "the data-parallel net itself")
    if not broadcast_computed_params:
        refuse("data_parallel_model.Parallelize: broadcast_computed_params=False is not supported; lockstep "
               "broadcasts the first replica's batch-norm statistics to the others after each step")
    if devices is None:
        devices = list(range(workspace.NumCudaDevices())) if not cpu_device else [0]
    if max_concurrent_distributed_ops is not None:
        lockstep_options["max_concurrent_distributed_ops"] = max_concurrent_distributed_ops
    if num_threads_per_device is not None:
        lockstep_options["num_threads_per_device"] = num_threads_per_device
    model_helper_obj._rendezvous = rendezvous
    return _dpm.Parallelize(
        model_helper_obj, input_builder_fun, forward_pass_builder_fun,
        param_update_builder_fun=param_update_builder_fun, optimizer_builder_fun=optimizer_builder_fun,
        post_sync_builder_fun=post_sync_builder_fun, devices=devices,
        rendezvous=_rendezvous(rendezvous, barrier_net_timeout_sec), net_type=net_type,
        optimize_gradient_memory=optimize_gradient_memory, blobs_to_keep=blobs_to_keep, use_nccl=use_nccl,
        cpu_device=cpu_device, shared_model=shared_model, combine_spatial_bn=combine_spatial_bn,
        **lockstep_options)


def Parallelize_GPU(*args, **kwargs):
    return Parallelize(*args, cpu_device=False, **kwargs)


def Parallelize_CPU(*args, **kwargs):
    return Parallelize(*args, cpu_device=True, **kwargs)


def _refuse_bmuf(*args, **kwargs):
    refuse("block-wise model update filtering (Parallelize_BMUF) is not supported; lockstep trains "
           "synchronously (Parallelize)")


Parallelize_BMUF = Parallelize_GPU_BMUF = Parallelize_CPU_BMUF = _refuse_bmuf


def RunInitNet(model):
    """Runs the model's param_init_net and creates its net."""
    workspace.RunNetOnce(model.param_init_net)
    workspace.CreateNet(model.net)


def RunNet(model, num_iterations):
    """Runs the data-parallel net ``num_iterations`` times."""
    workspace.RunNet(model.net.Proto().name, num_iterations)


def Synchronize(model, timeout_sec=None):
    """Waits for every shard: the parameters' broadcast is a collective that each of them joins (the
    parameters are equal already, so it changes nothing). One process: nothing to wait for."""
    if getattr(model, "shards", None) is not None:
        FinalizeAfterCheckpoint(model)


def AddBlobSync(model, blobs, net=None):
    """Appends to ``net`` (default model.net) a broadcast of each of ``blobs`` (unprefixed names) from the
    first replica to the others, over the devices and shards that Parallelize joined."""
    if not blobs:
        return
    prefixed = [b for b in blobs if str(b).startswith(model._device_prefix)]
    if prefixed:
        refuse(f"data_parallel_model.AddBlobSync: give unprefixed blob names, not {', '.join(prefixed)}")
    broadcasts = caffe2_pb2.NetDef.FromString(_dpm._parallel(model).broadcast_net_bytes()).op
    if not broadcasts:
        return  # one replica: every blob is in sync with itself
    (broadcast,) = broadcasts
    scopes = GetDeviceScopes(model)
    replicas = [core.BlobReference(scope + str(b)) for scope in scopes for b in blobs]
    net = model.net if net is None else net
    with core.DeviceScope(core.DeviceOption.of(broadcast.device_option)):
        net.Broadcast([core.BlobReference(broadcast.input[0])] + replicas, replicas,
                      **{arg.name: arg.i for arg in broadcast.arg})


def OptimizeGradientMemory(model, input_shapes, excluded_blobs, recycle_activations):
    """lockstep plans every blob's memory by liveness when it creates the net, so there is nothing to add."""


def ConvertNetForDevice(net, device=None):
    """A copy of ``net`` (a core.Net) whose blobs are under the device's name scope ("gpu_0/", "cpu_1/")
    and whose operators run on that device (default: the current DeviceScope)."""
    if device is None:
        device = core.CurrentDeviceScope()
    device = core.DeviceOption.of(device)
    namescope = f"{'gpu' if device.device_type == core.CUDA else 'cpu'}_{device.device_id}/"
    converted = core.Net(copy.deepcopy(net.Proto()))
    proto = converted.Proto()
    proto.name = net.Proto().name  # a copy of the net, as Caffe2's deepcopy: the same name
    for op in proto.op:
        op.input[:] = [namescope + name for name in op.input]
        op.output[:] = [namescope + name for name in op.output]
        op.control_input[:] = [namescope + name for name in op.control_input]
        op.device_option.CopyFrom(device.proto())
    proto.external_input[:] = [namescope + name for name in proto.external_input]
    proto.external_output[:] = [namescope + name for name in proto.external_output]
    return converted


# Caffe2 names this adapter lacks: one line naming them.
__getattr__ = missing_names("caffe2.python.data_parallel_model")
