"""The chaos matrix's view of lockstep checkpoints: read one, compare two bitwise, find the newest as the
launcher does, and corrupt one byte of tensor data in place."""
import json
import os
import re
import struct
import threading

# Trainer state that must match between a recovered run and the uninterrupted one, beside every tensor.
STATE_KEYS = ["model", "seed", "epochs_done", "iteration", "reader_position", "images_trained"]


def read_safetensors(path):
    """(metadata, {name: (dtype, shape, bytes)}, {name: (begin, end) offsets in the file})."""
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        data = f.read()
    metadata = header.pop("__metadata__", {})
    tensors, offsets = {}, {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        tensors[name] = (entry["dtype"], entry["shape"], data[begin:end])
        offsets[name] = (8 + size + begin, 8 + size + end)
    return metadata, tensors, offsets


def differences(actual, expected):
    """What differs between two checkpoints: [] when every tensor is bitwise equal and the trainer state
    agrees; else short descriptions (at most a few)."""
    if not os.path.exists(actual):
        return [f"no {os.path.basename(actual)}"]
    try:
        actual_metadata, actual_tensors, _ = read_safetensors(actual)
    except (OSError, ValueError, KeyError, struct.error) as e:
        return [f"{os.path.basename(actual)} unreadable: {e}"]
    expected_metadata, expected_tensors, _ = read_safetensors(expected)
    found = [f"tensor {name}" for name in sorted(set(actual_tensors) | set(expected_tensors))
             if actual_tensors.get(name) != expected_tensors.get(name)]
    found += [f"{key} {actual_metadata.get(key)} (expected {expected_metadata.get(key)})" for key in STATE_KEYS
              if actual_metadata.get(key) != expected_metadata.get(key)]
    return found[:4] + ([f"and {len(found) - 4} more"] if len(found) > 4 else [])


def checkpoints(directory, name="m"):
    """The finished checkpoints of `name` in `directory` (no temporary files), newest first in the launcher's
    order: by iteration, then epochs done (an epoch's checkpoint wins a tie with a mid-epoch one)."""
    found = []
    for file in os.listdir(directory):
        if not re.fullmatch(rf"{re.escape(name)}_(\d+|iter\d+)\.safetensors", file):
            continue
        path = os.path.join(directory, file)
        try:
            metadata = read_safetensors(path)[0]
            found.append(((int(metadata["iteration"]), int(metadata["epochs_done"])), path))
        except (OSError, ValueError, KeyError, struct.error):
            continue
    return [path for _, path in sorted(found, reverse=True)]


def corrupt(path, rng):
    """Flips bits of one byte inside one tensor's data, in place; returns (tensor, offset in the file)."""
    _, tensors, offsets = read_safetensors(path)
    name = rng.choice(sorted(n for n in offsets if offsets[n][1] > offsets[n][0]))
    offset = rng.randrange(*offsets[name])
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ rng.randrange(1, 256)]))
    return name, offset


class Watcher:
    """Notes when each checkpoint file of `name` first appears in `directory` (seconds on `clock`), looking
    every few milliseconds from a thread of its own, so a mid-epoch checkpoint removed later by
    --keep_checkpoints still has a time."""

    def __init__(self, directory, clock, name="m"):
        self.directory, self.clock, self.pattern = directory, clock, re.compile(
            rf"{re.escape(name)}_(\d+|iter\d+)\.safetensors")
        self.seen = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.005):
            try:
                files = os.listdir(self.directory)
            except OSError:
                continue
            for file in files:
                if self.pattern.fullmatch(file) and file not in self.seen:
                    self.seen[file] = self.clock()

    def appeared(self, path):
        return self.seen.get(os.path.basename(path))

    def stop(self):
        self._stop.set()
        self._thread.join()
