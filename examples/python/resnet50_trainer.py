#!/usr/bin/env python3
"""Caffe2's resnet50_trainer in Python over lockstep: the same flags as `lockstep train` / `resnet50_trainer`
(read from lockstep's option table), the model built by Python builder functions and
data_parallel_model.Parallelize, the same CSV log and checkpoints. Several machines: start one process per
shard, e.g. `mpirun -np 2 python3 resnet50_trainer.py --num_shards 2 --file_store_path DIR ...`.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/resnet50_trainer.py --train_data null \\
        --use_cpu --batch_size 16 --image_size 224 --epoch_size 160
"""
import argparse
import sys
import time

from lockstep import brew, checkpoint, core, data_parallel_model, model_helper, models, optimizer, workspace
from lockstep._core import C, Error, InvalidInput

# Flags of the command line that this script does not implement: given, they stop it (use `lockstep train`).
NOT_HERE = {"test_data", "dtype", "float16_compute", "enable_tensor_core", "loss_scale", "cudnn_workspace_limit_mb",
            "model_parallel", "micro_batches", "checkpoint_every_iters", "keep_checkpoints", "log_every_secs",
            "log_every_iters", "iter_log"}


def say(line):
    """Prints a line in one write: the lines of shards that share a terminal (mpirun) never interleave, even
    with PYTHONUNBUFFERED, under which print writes the text and its newline apart."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def parse_flags(argv):
    """The trainer's flags from lockstep's option table; returns the resolved C++ TrainerConfig and a
    function reading an option's value."""
    options = C.trainer_options()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for o in options:
        help_text = o["help"] + (f"; accepted range {o['range']}" if o["range"] else "")
        help_text = help_text.replace("%", "%%")  # argparse formats help with %
        if o["flag"]:
            # A switch that also takes a value, as Caffe2's scripts write it: --use_cpu or --use_cpu 1.
            parser.add_argument("--" + o["name"], nargs="?", const="true", default=None, metavar="true|false",
                                help=help_text)
        else:
            parser.add_argument("--" + o["name"], help=f"{help_text} (default {o['default'] or 'none'})")
    flags = {k: v for k, v in vars(parser.parse_args(argv)).items() if v is not None}
    for name in sorted(NOT_HERE & set(flags)):
        parser.error(f"--{name} is not implemented by this script; `lockstep train` has it")
    config = C.TrainerConfig()
    config.set("model", "resnet50")
    for name, value in flags.items():
        config.set(name, value)
    config.arguments = " ".join(argv)
    config.resolve(set(flags))
    kinds = {o["name"]: o for o in options}

    def value(name):
        text, o = config.get(name), kinds[name]
        convert = int if o["integer"] else float if o["numeric"] else str
        if o["flag"]:
            return text == "true"
        if o["list"]:
            return [convert(item) for item in text.split(",") if item]
        return convert(text)

    return config, value


def main(argv):
    config, flag = parse_flags(argv)
    say(C.version_line())
    claim = C.prepare_run_outputs(config)  # the checkpoint and log folders; holds the checkpoint name
    num_shards, shard_id = flag("num_shards"), flag("shard_id")
    devices = flag("gpus") or list(range(flag("num_gpus")))
    batch_per_device = flag("batch_size") // len(devices)
    seed = flag("seed")

    train_model = model_helper.ModelHelper(name=flag("model"), seed=seed)
    train_model.param_init_net.CreateDB(
        [], "train_reader", db=flag("train_data"), db_type=flag("db_type"), batch_size=batch_per_device,
        num_replicas=len(devices) * num_shards, seed=seed, num_channels=flag("num_channels"),
        image_size=flag("image_size"), num_labels=flag("num_labels"), scale=flag("scale"),
        record_format=flag("record_format"), color_order=flag("color_order"), prefetch=flag("prefetch"),
        decode_threads=flag("decode_threads"), skip_bad_records=int(flag("skip_bad_records")))

    def add_image_input(model):
        brew.image_input(model, "train_reader", ["data", "label"])

    def create_model_ops(model, loss_scale):
        logits = models.build(flag("model"), model, "data", flag("num_channels"), flag("image_size"),
                              flag("num_labels"))
        softmax, loss = brew.softmax_with_loss(model, [logits, "label"], ["softmax", "loss"])
        brew.accuracy(model, [softmax, "label"], "accuracy")
        return [brew.scale(model, loss, "scaled_loss", scale=loss_scale)]

    def add_parameter_update_ops(model):
        optimizer.build_sgd(model, base_learning_rate=flag("base_learning_rate"), momentum=flag("momentum"),
                            nesterov=flag("nesterov"), weight_decay=flag("weight_decay"))

    rendezvous = None
    if num_shards > 1:
        rendezvous = dict(num_shards=num_shards, shard_id=shard_id, run_id=flag("run_id"),
                          transport=flag("distributed_transport"), interfaces=flag("distributed_interfaces"),
                          algorithm=flag("allreduce_algorithm"), timeout=flag("timeout"),
                          first_iter_timeout=flag("first_iter_timeout"))
        if flag("redis_host"):
            rendezvous.update(redis_host=flag("redis_host"), redis_port=flag("redis_port"))
        else:
            rendezvous.update(file_store_path=flag("file_store_path"))
    data_parallel_model.Parallelize(
        train_model, input_builder_fun=add_image_input, forward_pass_builder_fun=create_model_ops,
        param_update_builder_fun=add_parameter_update_ops, devices=devices,
        cpu_device=config.device_type == core.CPU, rendezvous=rendezvous,
        optimize_gradient_memory=flag("optimize_gradient_memory"), combine_spatial_bn=flag("combine_spatial_bn"),
        blobs_to_keep=["loss", "accuracy"], max_threads=flag("threads"),
        bucket_bytes=int(flag("allreduce_bucket_mb") * (1 << 20)),
        tail_bucket_bytes=int(flag("allreduce_tail_bucket_mb") * (1 << 20)),
        max_concurrent_distributed_ops=flag("allreduce_channels"), allreduce_dtype=flag("allreduce_dtype"),
        num_threads_per_device=max(1, flag("threads") // len(devices)) if flag("threads") > 0 else 0)
    if train_model.shards:
        say(f"shard {shard_id} of {num_shards}: joined {train_model.shards.description}")
    first = data_parallel_model.GetDeviceScopes(train_model)[0]

    workspace.RunNetOnce(train_model.param_init_net)
    state = dict(epochs_done=0, reader_position=0, images_trained=0, training_milliseconds=0)
    resume_from = flag("load_model_path")
    if resume_from == "latest":
        resume_from = checkpoint.latest(flag("file_store_path"), flag("save_model_name")) or ""
        say(f"--load_model_path latest: {'resuming from ' + resume_from if resume_from else 'starting fresh'}")
    if resume_from:
        state = checkpoint.load(resume_from, train_model, reader="train_reader")
        if state["model"] != flag("model") or state["seed"] != seed:
            raise Error(f"checkpoint {resume_from} was saved from model '{state['model']}' with seed "
                        f"{state['seed']}; pass --model {state['model']} --seed {state['seed']}")
    workspace.CreateNet(train_model.net)
    global_batch = flag("batch_size") * num_shards
    epoch_size = flag("epoch_size") or C.reader_records(workspace.CurrentWorkspace(), "train_reader")
    iterations = epoch_size // global_batch
    if iterations == 0:
        raise Error(f"--epoch_size {epoch_size} is smaller than the global batch {global_batch}")
    iterations = C.limit_steps_per_epoch(iterations)

    log_name = C.CsvLog.file_name(flag("model"), len(devices), flag("batch_size"), flag("num_labels"),
                                  flag("base_learning_rate"))
    if shard_id > 0:
        log_name = log_name.replace(".log", f"_shard{shard_id}.log")
    log = C.CsvLog(flag("log_dir"), log_name, config.arguments)
    record = C.EpochRecord()
    record.cumulative_time_spent = state["training_milliseconds"] / 1000.0
    record.cumulative_input_count = state["images_trained"] // num_shards
    record.cumulative_batch_count = state.get("iteration", 0)
    first_epoch, done_in_first = state["epochs_done"], state.get("epoch_iteration", 0)
    shard_prefix = f"shard {shard_id}: " if num_shards > 1 else ""  # as `lockstep train` marks a shard's lines
    if first_epoch >= flag("num_epochs"):
        raise Error(f"checkpoint {resume_from} already has {first_epoch} epochs; raise --num_epochs to train further")
    if done_in_first >= iterations:
        raise Error(f"checkpoint {resume_from} is {done_in_first} steps into an epoch of {iterations}; "
                    f"pass the --epoch_size it was saved with")
    events = C.open_training_events(config)  # None without --tensorboard_dir
    if events:
        say(f"{shard_prefix}TensorBoard events: {events.path}")
    for epoch in range(first_epoch, flag("num_epochs")):
        steps = iterations - (done_in_first if epoch == first_epoch else 0)  # a resumed epoch's rest
        start = time.perf_counter()
        workspace.RunNet(train_model.net, steps)
        if epoch == first_epoch and train_model.shards:
            train_model.shards.end_first_iteration()
        seconds = time.perf_counter() - start
        record.time_spent = seconds
        record.cumulative_time_spent += seconds
        record.input_count = steps * flag("batch_size")
        record.cumulative_input_count += record.input_count
        record.cumulative_batch_count += steps
        record.accuracy = float(workspace.FetchBlob(first + "accuracy"))
        record.loss = float(workspace.FetchBlob(first + "loss"))
        record.learning_rate = float(workspace.FetchBlob(first + "lr").reshape(-1)[0])
        record.epoch = epoch + 1
        log.append(record)
        if events:
            C.write_epoch_events(events, record, record.cumulative_batch_count)
        say(f"{shard_prefix}epoch {epoch + 1}/{flag('num_epochs')}: {seconds:.1f} s, {record.input_count / seconds:.1f} img/s, "
            f"loss {record.loss:.4f}, train accuracy {record.accuracy:.4f}")
        state["reader_position"] += steps * global_batch
        state["images_trained"] += record.input_count * num_shards
        if flag("save_model_name") and shard_id == 0:
            path = checkpoint.path(flag("file_store_path"), flag("save_model_name"), epoch + 1)
            checkpoint.save(path, train_model, model_name=flag("model"), epochs_done=epoch + 1,
                            reader_position=state["reader_position"], images_trained=state["images_trained"],
                            training_milliseconds=int(record.cumulative_time_spent * 1000),
                            num_channels=flag("num_channels"), image_size=flag("image_size"),
                            num_labels=flag("num_labels"))
            say(f"saved checkpoint {path}")
    if train_model.shards:
        train_model.shards.close()
    say(f"log: {log.path}")
    del claim  # the run is over: another may save under its checkpoint name


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except Error as e:
        # As the lockstep command: 2 where running again fails the same way (a flag), 1 for the rest.
        print(f"resnet50_trainer.py: error: {e}", file=sys.stderr)
        sys.exit(2 if isinstance(e, InvalidInput) else 1)
