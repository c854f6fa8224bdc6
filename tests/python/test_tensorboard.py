"""TensorBoard's own reader (from PyPI, in tests/.venv: tests/setup_checkers.sh) on lockstep's event files: the
runs of a folder as `tensorboard --logdir` lists them, every scalar written through the binding read back
exactly, a short training run's rows, epochs and options. Run with build/python on PYTHONPATH and
LOCKSTEP_CLI_PATH naming the lockstep program."""
import csv
import json
import os
import subprocess

import numpy as np
import pytest

from lockstep._core import C

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECKER = os.path.join(REPO, "tests", ".venv", "bin", "python")

# Every run of a log folder, as TensorBoard's event multiplexer loads it: {run: {"scalars": {tag: [[step,
# value], ...]}, "texts": {tag: [text, ...]}}}.
READER = r"""
import json, sys
from tensorboard.backend.event_processing import event_multiplexer
runs = event_multiplexer.EventMultiplexer().AddRunsFromDirectory(sys.argv[1])
runs.Reload()
out = {}
for run, tags in runs.Runs().items():
    out[run] = {
        "scalars": {t: [[e.step, e.value] for e in runs.Scalars(run, t)] for t in tags["scalars"]},
        "texts": {t: [e.tensor_proto.string_val[0].decode() for e in runs.Tensors(run, t)] for t in tags["tensors"]},
    }
print(json.dumps(out))
"""

pytestmark = pytest.mark.skipif(not os.path.exists(CHECKER),
                                reason="TensorBoard's reader is not installed: run tests/setup_checkers.sh")


def read_runs(logdir):
    result = subprocess.run([CHECKER, "-c", READER, str(logdir)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_reader_lists_each_run_folder_and_reads_every_scalar_exactly(tmp_path):
    values = {"shard0": [0.1, 2.5, -3.75e-5, 1e9], "shard1": [7.0, 0.3333, 123.456, 0.0]}
    for run, series in values.items():
        events = C.EventFile(str(tmp_path / run))
        for step, value in enumerate(series):
            events.scalar("train/loss", step * 10, value)
        events.text("options", 0, f"| run | {run} |")
        del events
    runs = read_runs(tmp_path)
    assert sorted(runs) == ["shard0", "shard1"]
    for run, series in values.items():
        assert runs[run]["scalars"] == {
            "train/loss": [[step * 10, float(np.float32(v))] for step, v in enumerate(series)]}
        assert runs[run]["texts"] == {"options": [f"| run | {run} |"]}


def test_a_training_run_shows_its_rows_epochs_and_options(tmp_path):
    iter_log = tmp_path / "iter.csv"
    subprocess.run([os.environ["LOCKSTEP_CLI_PATH"], "train", "--use_cpu", "--model", "lenet", "--train_data",
                    "null", "--num_channels", "1", "--image_size", "28", "--num_labels", "10", "--batch_size", "8",
                    "--epoch_size", "48", "--num_epochs", "2", "--threads", "1", "--log_every_iters", "1",
                    "--log_dir", str(tmp_path), "--iter_log", str(iter_log), "--tensorboard_dir",
                    str(tmp_path / "tb")], check=True, capture_output=True, timeout=300)
    runs = read_runs(tmp_path / "tb")
    assert list(runs) == ["."]  # one shard: the folder itself is the run
    scalars = runs["."]["scalars"]
    assert sorted(scalars) == sorted(
        ["train/loss", "train/accuracy", "train/learning_rate", "train/images_per_sec", "train/epoch_eta_seconds",
         "train/run_eta_seconds", "epoch/loss", "epoch/accuracy", "epoch/images_per_sec", "epoch/learning_rate"])
    with open(iter_log) as f:
        rows = list(csv.DictReader(f))
    assert [step for step, _ in scalars["train/loss"]] == list(range(1, 13)) and len(rows) == 12
    for (step, loss), row in zip(scalars["train/loss"], rows):
        assert loss == pytest.approx(float(row["loss"]), abs=1e-6)  # the CSV prints 6 decimals
    assert [step for step, _ in scalars["epoch/loss"]] == [6, 12]
    assert scalars["epoch/loss"][1][1] == scalars["train/loss"][11][1]
    [options] = runs["."]["texts"]["options"]
    assert "| model | lenet |" in options and "| epoch_size | 48 |" in options
