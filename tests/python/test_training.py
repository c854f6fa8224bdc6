"""Training from Python against the command line: the seed-style LeNet example reaches the parameters of
`lockstep train` with the same flags, resnet50_trainer.py under mpirun matches one process with the global
batch, and checkpoints go between Python and the command line both ways. Run with build/python on
PYTHONPATH; skipped without Fashion-MNIST or the lockstep binary."""
import json
import os
import shutil
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

from lockstep import brew, checkpoint, data_parallel_model, model_helper, models, optimizer, workspace
from lockstep._core import C, InvalidInput

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.environ.get("LOCKSTEP_CLI_PATH", os.path.join(REPO, "build", "lockstep"))
EXAMPLES = os.path.join(REPO, "examples", "python")
FASHION_MNIST = os.environ.get("LOCKSTEP_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")
LENET_FLAGS = ["--model", "lenet", "--train_data", "fashion-mnist", "--use_cpu", "--base_learning_rate", "0.2",
               "--momentum", "0", "--weight_decay", "0"]

pytestmark = [
    pytest.mark.skipif(not os.path.exists(CLI), reason="the lockstep binary is not built"),
    pytest.mark.skipif(not os.path.exists(os.path.join(FASHION_MNIST, "train-images-idx3-ubyte.gz")),
                       reason="dataset-fashion-mnist is not installed"),
]


def read_safetensors(path):
    """{name: array} and the metadata of a safetensors file, after checking each tensor's bytes against the
    CRC32 its metadata records (zlib's, as lockstep writes it)."""
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    metadata = header.pop("__metadata__", {})
    types = {"F32": np.float32, "I64": np.int64, "I32": np.int32, "F16": np.float16}
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        raw = data[8 + size + begin:8 + size + end]
        assert f"{zlib.crc32(raw):08x}" == metadata[f"crc32:{name}"], f"{path}: {name}"
        tensors[name] = np.frombuffer(raw, dtype=types[entry["dtype"]]).reshape(entry["shape"])
    return tensors, metadata


def largest_relative_difference(a, b):
    assert sorted(a) == sorted(b)
    worst = 0.0
    for name in b:
        diff = np.linalg.norm(a[name].astype(np.float64) - b[name])
        worst = max(worst, diff / max(np.linalg.norm(b[name].astype(np.float64)), 1e-30))
    return worst


def run(command, cwd, env=None):
    result = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, timeout=300)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout}"
    return result.stdout


def python_env():
    return dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))


def test_lenet_example_reaches_the_command_lines_parameters(tmp_path):
    steps, batch = 20, 256
    run([CLI, "train"] + LENET_FLAGS + ["--num_gpus", "2", "--batch_size", str(batch), "--num_epochs", "1",
                                        "--epoch_size", str(steps * batch), "--save_model_name", "cli",
                                        "--file_store_path", ".", "--log_dir", "."], tmp_path)
    output = run([sys.executable, os.path.join(EXAMPLES, "lenet_data_parallel.py"), "--devices", "0,1",
                  "--steps", str(steps), "--save", "python.safetensors"], tmp_path, python_env())
    assert "epoch 1: 20 steps" in output
    python, python_meta = read_safetensors(tmp_path / "python.safetensors")
    cli, cli_meta = read_safetensors(tmp_path / "cli_1.safetensors")
    assert largest_relative_difference(python, cli) <= 1e-6
    for key in ("model", "seed", "iteration", "reader_position"):
        assert python_meta[key] == cli_meta[key], key


@pytest.mark.skipif(not C.cpu_has_bfloat16(), reason=f"no AVX512_BF16 or AMX on this CPU ({C.cpu_isa()})")
def test_lenet_example_in_bfloat16_reaches_the_command_lines_parameters(tmp_path):
    steps, batch = 10, 256
    run([CLI, "train"] + LENET_FLAGS + ["--num_gpus", "2", "--batch_size", str(batch), "--num_epochs", "1",
                                        "--epoch_size", str(steps * batch), "--dtype", "bfloat16",
                                        "--save_model_name", "cli", "--file_store_path", ".", "--log_dir", "."],
        tmp_path)
    run([sys.executable, os.path.join(EXAMPLES, "lenet_data_parallel.py"), "--devices", "0,1", "--steps",
         str(steps), "--dtype", "bfloat16", "--save", "python.safetensors"], tmp_path, python_env())
    python, _ = read_safetensors(tmp_path / "python.safetensors")
    cli, _ = read_safetensors(tmp_path / "cli_1.safetensors")
    assert all(value.dtype == np.float32 for name, value in python.items() if "conv" in name or "fc" in name)
    assert largest_relative_difference(python, cli) <= 1e-6


def test_two_mpirun_shards_match_one_process_with_the_global_batch(tmp_path):
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun is not installed")
    trainer = os.path.join(EXAMPLES, "resnet50_trainer.py")
    flags = LENET_FLAGS + ["--epoch_size", "320", "--num_epochs", "1", "--save_model_name", "m"]
    (tmp_path / "shards").mkdir()  # where the shards meet must exist; "one" is made by the trainer
    run([sys.executable, trainer] + flags + ["--num_gpus", "2", "--batch_size", "16", "--file_store_path", "one",
                                             "--log_dir", "one"], tmp_path, python_env())
    env = dict(python_env(), OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    output = run(["mpirun", "-np", "2", "--oversubscribe", "-x", "PYTHONPATH", sys.executable, trainer] + flags
                 + ["--num_gpus", "1", "--batch_size", "8", "--file_store_path", "shards", "--log_dir", "shards",
                    "--allreduce_bucket_mb", "0.05", "--allreduce_tail_bucket_mb", "0.01"],
                 tmp_path, env)
    assert "shard 1 of 2: joined" in output
    one, _ = read_safetensors(tmp_path / "one" / "m_1.safetensors")
    shards, _ = read_safetensors(tmp_path / "shards" / "m_1.safetensors")
    assert largest_relative_difference(shards, one) <= 1e-6


def test_resnet50_trainer_resumes_the_command_lines_mid_epoch_checkpoint(tmp_path):
    flags = LENET_FLAGS + ["--num_gpus", "2", "--batch_size", "32", "--epoch_size", "320", "--num_epochs", "2",
                           "--save_model_name", "m"]
    (tmp_path / "cli").mkdir()
    (tmp_path / "python").mkdir()
    run([CLI, "train"] + flags + ["--file_store_path", "cli", "--log_dir", "cli", "--checkpoint_every_iters", "13",
                                  "--keep_checkpoints", "0"], tmp_path)
    shutil.copy(tmp_path / "cli" / "m_iter0000000013.safetensors", tmp_path / "python")
    output = run([sys.executable, os.path.join(EXAMPLES, "resnet50_trainer.py")] + flags
                 + ["--file_store_path", "python", "--log_dir", "python", "--load_model_path", "latest"], tmp_path,
                 python_env())
    assert "resuming from python/m_iter0000000013.safetensors" in output
    assert "epoch 2/2" in output and "epoch 1/2" not in output
    resumed, _ = read_safetensors(tmp_path / "python" / "m_2.safetensors")
    uninterrupted, _ = read_safetensors(tmp_path / "cli" / "m_2.safetensors")
    assert largest_relative_difference(resumed, uninterrupted) == 0


def build_lenet(devices):
    """LeNet as `lockstep train --model lenet` builds it, trained with plain SGD on Fashion-MNIST."""
    workspace.ResetWorkspace()
    model = model_helper.ModelHelper(name="lenet")
    model.param_init_net.CreateDB([], "reader", db="fashion-mnist", batch_size=64 // len(devices),
                                  num_replicas=len(devices))

    def forward(m, loss_scale):
        logits = models.build("lenet", m, "data", num_channels=1, image_size=28, num_labels=10)
        softmax, loss = brew.softmax_with_loss(m, [logits, "label"], ["softmax", "loss"])
        return [brew.scale(m, loss, "scaled_loss", scale=loss_scale)]

    data_parallel_model.Parallelize_CPU(
        model, input_builder_fun=lambda m: brew.image_input(m, "reader", ["data", "label"]),
        forward_pass_builder_fun=forward, devices=devices,
        param_update_builder_fun=lambda m: optimizer.build_sgd(m, 0.2, momentum=0.9))
    workspace.RunNetOnce(model.param_init_net)
    workspace.CreateNet(model.net)
    return model


def test_fetched_blobs_are_what_the_checkpoint_holds_and_the_command_line_resumes_it(tmp_path):
    model = build_lenet([0, 1])
    workspace.RunNet(model.net, 3)
    state = checkpoint.save(tmp_path / "lenet_1.safetensors", model, epochs_done=1, reader_position=3 * 64)
    assert state["iteration"] == 3 and state["model"] == "lenet"
    saved, metadata = read_safetensors(tmp_path / "lenet_1.safetensors")
    np.testing.assert_array_equal(workspace.FetchBlob("cpu_0/conv1_w"), saved["conv1_w"])
    assert set(saved) == {str(name)[len("cpu_0/"):] for name in data_parallel_model.GetCheckpointParams(model)}

    # The command line resumes the Python checkpoint for a second epoch and writes its own.
    run([CLI, "train", "--model", "lenet", "--train_data", "fashion-mnist", "--use_cpu", "--num_gpus", "2",
         "--batch_size", "64", "--epoch_size", "192", "--num_epochs", "2", "--base_learning_rate", "0.2",
         "--momentum", "0.9", "--weight_decay", "0", "--load_model_path", "lenet_1.safetensors",
         "--save_model_name", "lenet", "--file_store_path", ".", "--log_dir", "."], tmp_path)
    resumed, resumed_meta = read_safetensors(tmp_path / "lenet_2.safetensors")
    assert int(resumed_meta["iteration"]) == 6

    # Python continues from the same checkpoint to the same parameters, and loads the command line's.
    model = build_lenet([0, 1])
    loaded = checkpoint.load(tmp_path / "lenet_1.safetensors", model, reader="reader")
    assert loaded["reader_position"] == 192
    workspace.RunNet(model.net, 3)
    for scope in ("cpu_0/", "cpu_1/"):
        np.testing.assert_array_equal(workspace.FetchBlob(scope + "conv1_w"), resumed["conv1_w"])
    # Python's checkpoint records no geometry unless given; the command line's records its model's.
    assert (loaded["num_channels"], loaded["image_size"], loaded["num_labels"]) == (0, 0, 0)
    loaded = checkpoint.load(tmp_path / "lenet_2.safetensors", model)
    assert (loaded["model"], loaded["num_channels"], loaded["image_size"], loaded["num_labels"]) == ("lenet", 1, 28, 10)
    np.testing.assert_array_equal(workspace.FetchBlob("cpu_1/fc4_w"), resumed["fc4_w"])


def test_a_checkpoint_of_another_model_is_refused(tmp_path):
    model = build_lenet([0])
    checkpoint.save(tmp_path / "one_device.safetensors", model)
    other = model_helper.ModelHelper(name="other")
    with pytest.raises(Exception, match="not been parallelized"):
        checkpoint.load(tmp_path / "one_device.safetensors", other)
    with pytest.raises(OSError, match="missing.safetensors"):
        checkpoint.load(tmp_path / "missing.safetensors", model)
    with pytest.raises(IsADirectoryError, match="name a .safetensors file in it"):
        checkpoint.load(tmp_path, model)


def test_a_load_naming_a_missing_reader_changes_nothing(tmp_path):
    model = build_lenet([0])
    checkpoint.save(tmp_path / "lenet_1.safetensors", model)
    workspace.RunNet(model.net, 2)
    trained = workspace.FetchBlob("cpu_0/conv1_w").copy()
    with pytest.raises(InvalidInput, match=r"^no reader 'Reader' in the workspace; make it with CreateDB"):
        checkpoint.load(tmp_path / "lenet_1.safetensors", model, reader="Reader")
    np.testing.assert_array_equal(workspace.FetchBlob("cpu_0/conv1_w"), trained)
