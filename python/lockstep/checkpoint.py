"""Checkpoints in the trainer's format: the first replica's state (parameters, batch-norm statistics,
optimizer state) without its name scope, and the trainer's position, in one safetensors file written
atomically. ``lockstep train --load_model_path`` reads what ``save`` writes, and ``load`` reads the
trainer's files."""
import errno
import os
import warnings

from lockstep import workspace
from lockstep._core import C
from lockstep.data_parallel_model import _parallel


def path(directory, name, epoch):
    """{directory}/{name}_{epoch}.safetensors, the trainer's file name."""
    return C.checkpoint_path(directory, name, epoch)


def latest(directory, name):
    """The checkpoint of ``name`` in ``directory`` with the most iterations (epoch or mid-epoch) whose
    checksums hold, as the trainer's --load_model_path latest resolves it; None when there is none. Each file
    passed over (corrupt, truncated, not a training checkpoint) gets a warning saying why."""
    found, skipped = C.latest_checkpoint(str(directory), name)
    for why in skipped:
        warnings.warn(f"checkpoint.latest passed over {why}", stacklevel=2)
    return found or None


def save(file_path, model, model_name=None, epochs_done=0, epoch_iteration=0, reader_position=0, seed=None,
         images_trained=0, training_milliseconds=0, num_channels=0, image_size=0, num_labels=0):
    """Saves the first replica's state. ``model_name`` (default: the model's name, refused when it is a zoo
    model's and ``models.build`` did not build that model) and ``seed`` (default: the model's) are what a
    resuming run must match; ``reader_position`` is where the training stream resumes and ``epoch_iteration``
    the steps already taken in epoch ``epochs_done + 1`` (0 at an epoch's end).
    ``num_channels``, ``image_size`` and ``num_labels`` (0: not recorded) are the geometry the model was built
    with, which ``lockstep eval`` and a resuming ``lockstep train`` then take from the checkpoint, as they take
    ``model_name``."""
    parallel = _parallel(model)
    if model_name is None:
        model_name = _recorded_name(model)
    scope = parallel.scopes[0]
    iteration = 0
    if workspace.HasBlob(scope + "iter"):
        iteration = int(workspace.FetchBlob(scope + "iter").reshape(-1)[0])
    state = dict(model=model_name, epochs_done=int(epochs_done), iteration=iteration,
                 epoch_iteration=int(epoch_iteration),
                 reader_position=int(reader_position), seed=int(model._cpp.seed if seed is None else seed),
                 images_trained=int(images_trained), training_milliseconds=int(training_milliseconds),
                 num_channels=int(num_channels), image_size=int(image_size), num_labels=int(num_labels))
    C.save_checkpoint(str(file_path), workspace.CurrentWorkspace(), scope, list(parallel.state_blobs), state)
    return state


def _recorded_name(model):
    """The model's name, unless it names a zoo model that lockstep.models.build did not build: lockstep eval
    and a resuming lockstep train would build that zoo model in its place."""
    built = getattr(model, "_zoo_model", None)
    if C.is_known_model(model.name) and built != model.name:
        raise ValueError(f"checkpoint.save: the model is named '{model.name}' like a zoo model, which "
                         f"lockstep eval and lockstep train would build from the checkpoint, but "
                         f"models.build('{model.name}', ...) did not build it; pass model_name= a name of its own")
    return model.name


def load(file_path, model, reader=None):
    """Loads a checkpoint into the first replica and copies it to every device and shard; returns the
    trainer state it was saved with (model, its geometry, epochs_done, iteration, reader_position, seed, ...). With
    ``reader`` (a CreateDB output, created already), its stream continues where the checkpoint left off."""
    parallel = _parallel(model)
    # As open() says it in Python (the command line exits 2 on it).
    if os.path.isdir(file_path):
        raise IsADirectoryError(errno.EISDIR, "a folder; name a .safetensors file in it", str(file_path))
    if not os.path.isfile(file_path):
        raise FileNotFoundError(errno.ENOENT, "no checkpoint file here; check the path", str(file_path))
    if reader is not None:
        C.require_reader(workspace.CurrentWorkspace(), str(reader))  # before anything is replaced
    state = C.load_checkpoint(str(file_path), workspace.CurrentWorkspace(), parallel.scopes[0],
                              list(parallel.state_blobs))
    workspace.RunNetOnce(parallel.broadcast_net_bytes())
    if reader is not None:
        C.reader_seek(workspace.CurrentWorkspace(), str(reader), state["reader_position"])
    return state
