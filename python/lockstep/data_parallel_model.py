"""Synchronous data parallelism, as Caffe2's ``data_parallel_model``.

Write three builder functions that describe one replica and let ``Parallelize`` call them once per device
under that device's scopes ("cpu_0/", "gpu_1/", ...): it adds the backward pass, allreduces the gradients in
buckets that start as soon as their last gradient is computed, and adds each replica's update, so every
replica holds the same parameters after every step. With ``rendezvous``, the job spans several processes
(machines) through Gloo. The rewrite itself is lockstep's C++ Parallelize.
"""
import datetime
import numbers
import sys

from lockstep import core, workspace
from lockstep._core import C, InvalidInput

_SHARDS_OBJECT = "shards"  # the workspace object of the shards' communicator


def Parallelize(model_helper_obj, input_builder_fun, forward_pass_builder_fun, param_update_builder_fun=None,
                optimizer_builder_fun=None, devices=None, rendezvous=None, net_type="dag",
                broadcast_computed_params=True, optimize_gradient_memory=False, blobs_to_keep=None,
                use_nccl=False, max_concurrent_distributed_ops=2, cpu_device=False, num_threads_per_device=0,
                shared_model=False, combine_spatial_bn=False, bucket_bytes=8 << 20, share_buffers=True,
                micro_batches=1, devices_per_replica=1, max_threads=0, tail_bucket_bytes=0,
                allreduce_dtype="float", post_sync_builder_fun=None):
    """Builds ``model_helper_obj.net`` as the data-parallel training net (it must be empty).

    input_builder_fun(model): adds the ops that read this replica's input (brew.image_input).
    forward_pass_builder_fun(model, loss_scale): adds the forward pass; returns its losses multiplied by
        loss_scale (1 / replicas in the job), so the summed gradients are those of the global batch.
    param_update_builder_fun(model): adds the update (optimizer.build_sgd); None for forward only.
    devices: device ids, e.g. [0, 1]; cpu_device=True places them on CPU devices.
    rendezvous: for several processes, dict(num_shards=, shard_id=, and redis_host=/redis_port= or
        file_store_path=, run_id=, engine="GLOO", transport="tcp", interface=, algorithm=, timeout= and
        first_iter_timeout= seconds);
        num_shards and shard_id default to what mpirun or srun give.

    max_concurrent_distributed_ops: gradient allreduces in flight at once across the shards, each on its own
        connections (channels), on CPU devices; CUDA devices use one. The default is the command line's, 2
        (Caffe2's was 16; more than 2 measured no faster).
    bucket_bytes, tail_bucket_bytes: gradients allreduced together (ParallelOptions).
    allreduce_dtype: "float", or "bfloat16" / "float16": the buckets cross shards (and GPUs) in 16 bits, summed
        in float32 at every hop; the update reads float32 gradients (--allreduce_dtype).

    share_buffers: blobs whose lifetimes do not overlap share buffers (the memory plan; the same results).
        Blobs that no op reads after writing them (accuracies), the returned losses and what they are
        computed from (the loss before its scale), learning rates and blobs_to_keep stay fetchable; to fetch
        another intermediate blob after a run, name it in blobs_to_keep or pass share_buffers=False.
        optimize_gradient_memory is accepted as Caffe2 programs pass it: sharing is on by default.

    post_sync_builder_fun(model): called once per replica under its scopes after Parallelize has added the
        initial broadcast of the parameters to param_init_net: the ops it adds there run after that broadcast.
    shared_model (CPU devices only): as in Caffe2, the replicas compute with the first device's parameters,
        which alone are updated; the other devices keep no copy of the parameters or of their optimizer
        state, and their names (``cpu_1/conv1_w``) are views of the first device's. Results are unchanged.

    lockstep always runs the "dag" executor, broadcasts computed parameters and uses NCCL between distinct
    GPUs, so net_type, broadcast_computed_params and use_nccl are accepted as Caffe2 programs pass them.

    As Caffe2's, it sets ``model._device_type``, ``model._device_prefix`` ("cpu" or "gpu") and
    ``model._devices`` before calling the builders.
    """
    model = model_helper_obj
    if net_type not in ("dag", "async_scheduling", "simple", None):
        raise InvalidInput(f"Parallelize: unknown net_type {net_type!r}")
    if shared_model and not cpu_device:
        raise InvalidInput("Parallelize: shared_model is for CPU devices (cpu_device=True), as in Caffe2")
    if param_update_builder_fun is not None and optimizer_builder_fun is not None:
        raise InvalidInput("Parallelize: pass param_update_builder_fun or optimizer_builder_fun, not both")
    update = param_update_builder_fun or optimizer_builder_fun
    for name, builder, required in (("input_builder_fun", input_builder_fun, True),
                                    ("forward_pass_builder_fun", forward_pass_builder_fun, True),
                                    ("the update builder", update, False)):
        if not callable(builder) and (required or builder is not None):
            raise InvalidInput(f"Parallelize: {name} is {builder!r}; pass a function of the model")
    for name, value, least in (("bucket_bytes", bucket_bytes, 0), ("tail_bucket_bytes", tail_bucket_bytes, 0),
                               ("num_threads_per_device", num_threads_per_device, 0),
                               ("max_threads", max_threads, 0), ("micro_batches", micro_batches, 1),
                               ("devices_per_replica", devices_per_replica, 1)):
        if not isinstance(value, numbers.Integral) or value < least:
            raise InvalidInput(f"Parallelize: {name} must be a whole number of at least {least}, got {value!r}")
    if not devices:
        raise InvalidInput("Parallelize: devices is empty; pass device ids such as devices=[0, 1]")
    if isinstance(devices, (str, bytes)) or not all(isinstance(d, numbers.Integral) for d in devices):
        raise InvalidInput(f"Parallelize: devices must be a list of device ids such as [0, 1], got {devices!r}")
    device_type = core.CPU if cpu_device else core.CUDA
    if device_type == core.CUDA and C.cuda_device_count() == 0:
        print(f"lockstep: no CUDA GPU here; running on CPU devices {', '.join(map(str, devices))}",
              file=sys.stderr)
        device_type = core.CPU
    model._device_type = device_type
    model._device_prefix = "cpu" if device_type == core.CPU else "gpu"
    model._devices = [int(d) for d in devices]
    model._lr_blobs = []
    options = C.ParallelOptions()
    options.devices = [int(d) for d in devices]
    options.device_type = device_type
    options.share_buffers = bool(share_buffers)
    options.keep_blobs = [str(b) for b in (blobs_to_keep or [])]
    options.combine_spatial_bn = bool(combine_spatial_bn)
    options.shared_model = bool(shared_model)
    options.threads_per_device = int(num_threads_per_device)
    options.max_threads = int(max_threads)
    options.bucket_bytes = int(bucket_bytes)
    options.tail_bucket_bytes = int(tail_bucket_bytes)
    options.allreduce_dtype = str(allreduce_dtype)
    if rendezvous is not None and device_type == core.CPU:
        options.allreduce_channels = int(max_concurrent_distributed_ops)
    options.micro_batches = int(micro_batches)
    options.devices_per_replica = int(devices_per_replica)
    shards = None
    if rendezvous is not None:
        meet, network = _rendezvous_options(rendezvous)
        options.num_shards, options.shard_id = meet.num_shards, meet.shard_id
        if meet.num_shards > 1:
            options.shard_communicator = _SHARDS_OBJECT
            shards = C.connect_shards(workspace.CurrentWorkspace(), _SHARDS_OBJECT, meet, network)

    def forward(replica, loss_scale):
        losses = forward_pass_builder_fun(replica, loss_scale)
        if losses is None:
            return []
        return [replica._scope_name(loss) for loss in ([losses] if isinstance(losses, str) else losses)]

    model._sync_nets()
    model.parallel = C.parallelize(model._cpp, model, _in_replica_scopes(input_builder_fun),
                                   _in_replica_scopes(forward), update and _in_replica_scopes(update), options)
    model.shards = shards
    model.device_type = device_type
    if post_sync_builder_fun is not None:
        for device, scope in zip(model._devices, model.parallel.scopes):
            with core.DeviceScope(core.DeviceOption(device_type, device)), core.NameScope(scope):
                post_sync_builder_fun(model)
    if shards is not None:
        shards.agree_on_model(model._cpp, model.parallel, [])
    return model.parallel


def _in_replica_scopes(builder):
    """``builder`` called under the replica's core.NameScope and core.DeviceScope, as Caffe2 calls it: the
    scopes Parallelize gave the model, so that GetParams() and CurrentNameScope() name this replica's."""
    def call(model, *args):
        device = model._cpp.device
        with core.NameScope(model._cpp.scoped(""), reset=True), \
                core.DeviceScope(core.DeviceOption(device.type, device.id)):
            return builder(model, *args)
    return call


def Parallelize_GPU(model_helper_obj, **kwargs):
    """Parallelize on CUDA devices (on CPU devices where this machine has no GPU)."""
    return Parallelize(model_helper_obj, cpu_device=False, **kwargs)


def Parallelize_CPU(model_helper_obj, **kwargs):
    """Parallelize on CPU devices: each runs its replica on its own threads."""
    return Parallelize(model_helper_obj, cpu_device=True, **kwargs)


def _rendezvous_options(rendezvous):
    rendezvous = dict(rendezvous)
    launched = C.launcher_shards() or {}
    meet, network = C.RendezvousOptions(), C.GlooOptions()
    meet.num_shards = int(rendezvous.pop("num_shards", launched.get("num_shards", 1)))
    meet.shard_id = int(rendezvous.pop("shard_id", launched.get("shard_id", 0)))
    meet.run_id = str(rendezvous.pop("run_id", launched.get("job_id", "")))
    engine = str(rendezvous.pop("engine", "GLOO")).upper()
    if engine != "GLOO":
        raise InvalidInput(f"rendezvous engine {engine!r} is not supported; lockstep's shards use GLOO")
    meet.redis_host = str(rendezvous.pop("redis_host", ""))
    meet.redis_port = int(rendezvous.pop("redis_port", 6379))
    meet.file_store_path = str(rendezvous.pop("file_store_path", ""))
    if meet.num_shards > 1 and not meet.redis_host and not meet.file_store_path:
        raise InvalidInput("rendezvous needs redis_host (and redis_port) or file_store_path to meet the "
                           "other shards")
    if meet.num_shards > 1 and not meet.run_id:
        raise InvalidInput("rendezvous needs a run_id that all shards share (mpirun and srun give one)")
    network.transport = str(rendezvous.pop("transport", "tcp"))
    interface = rendezvous.pop("interface", rendezvous.pop("interfaces", []))
    network.interfaces = [interface] if isinstance(interface, str) and interface else list(interface or [])
    network.algorithm = str(rendezvous.pop("algorithm", "auto"))
    if "timeout" in rendezvous:
        network.timeout = datetime.timedelta(seconds=float(rendezvous.pop("timeout")))
    if "first_iter_timeout" in rendezvous:  # meeting the others and the first step: the slowest start-up
        meet.timeout = network.first_iter_timeout = datetime.timedelta(
            seconds=float(rendezvous.pop("first_iter_timeout")))
    rendezvous.pop("exit_nets", None)  # Caffe2's exit nets: lockstep's shards end together on their own
    if rendezvous:
        raise InvalidInput(f"unknown rendezvous keys: {', '.join(sorted(rendezvous))}")
    return meet, network


def _parallel(model):
    if getattr(model, "parallel", None) is None:
        raise InvalidInput("the model has not been parallelized; call data_parallel_model.Parallelize first")
    return model.parallel


def GetCheckpointParams(model):
    """The blobs a checkpoint holds: the first replica's parameters, statistics and optimizer state."""
    parallel = _parallel(model)
    return [core.BlobReference(parallel.scopes[0] + name) for name in parallel.state_blobs]


def FinalizeAfterCheckpoint(model, blobs=None):
    """After loading the first replica's state (from a checkpoint), copies it to every device and shard."""
    workspace.RunNetOnce(_parallel(model).broadcast_net_bytes())


def GetLearningRateBlobNames(model):
    """The learning-rate blob of each replica that optimizer.build_sgd added, in device order (the first
    replica's only with shared_model, whose update alone runs)."""
    _parallel(model)
    return [core.BlobReference(name) for name in model._lr_blobs]


def GetDeviceType(model):
    """core.CPU or core.CUDA: where Parallelize placed the replicas."""
    _parallel(model)
    return model.device_type


def GetDeviceScopes(model):
    """Each replica's name scope: "cpu_0/", "cpu_1/", ..."""
    return list(_parallel(model).scopes)
