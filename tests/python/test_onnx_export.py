"""`lockstep export` checked by the real runtime: onnxruntime (from PyPI, in tests/.venv, which
tests/setup_checkers.sh creates) runs the exported models on the images `lockstep eval` reads, prepared as the
model's metadata documents, and must agree with eval's logits: on all 10,000 Fashion-MNIST test images for a
briefly trained LeNet (identical top-1, max |logit difference| <= 1e-4), and on 64 images of an image
database for a briefly trained ResNet-50 (identical top-1). Also lockstep.export_onnx from Python, for a
checkpoint and for a net built in Python. Run with build/python on PYTHONPATH."""
import csv
import gzip
import json
import os
import struct
import subprocess

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.environ.get("LOCKSTEP_CLI_PATH", os.path.join(REPO, "build", "lockstep"))
FASHION_MNIST = os.environ.get("LOCKSTEP_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")
VENV_PYTHON = os.path.join(REPO, "tests", ".venv", "bin", "python")


def venv_has_onnxruntime():
    if not os.path.exists(VENV_PYTHON):
        return False
    return subprocess.run([VENV_PYTHON, "-c", "import onnxruntime"], capture_output=True).returncode == 0


pytestmark = [
    pytest.mark.skipif(not os.path.exists(CLI), reason="the lockstep binary is not built"),
    pytest.mark.skipif(not venv_has_onnxruntime(),
                       reason="tests/.venv has no onnxruntime: run tests/setup_checkers.sh"),
]
needs_fashion_mnist = pytest.mark.skipif(
    not os.path.exists(os.path.join(FASHION_MNIST, "t10k-images-idx3-ubyte.gz")),
    reason="dataset-fashion-mnist is not installed")

# Runs in tests/.venv: the model on the inputs of an .npy file, the outputs to another, and what the runtime
# reads of the model (input, output, metadata) as JSON on stdout.
ONNXRUNTIME = """
import json, sys
import numpy as np
import onnxruntime as ort
model, inputs, outputs = sys.argv[1:4]
options = ort.SessionOptions()
options.intra_op_num_threads = 2
session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
x = np.load(inputs)
(given,) = session.get_inputs()
np.save(outputs, session.run(None, {given.name: x})[0])
print(json.dumps({"input": given.name, "input_shape": given.shape, "input_type": given.type,
                  "output": session.get_outputs()[0].name,
                  "metadata": session.get_modelmeta().custom_metadata_map}))
"""


def run(command, cwd, env=None):
    result = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, timeout=300)
    assert result.returncode == 0, f"{' '.join(map(str, command))} failed:\n{result.stdout}"
    return result.stdout


def onnxruntime(model, images, tmp_path):
    """The model's outputs for `images` (float32 NCHW) under onnxruntime, and what it read of the model."""
    np.save(tmp_path / "inputs.npy", images)
    out = run([VENV_PYTHON, "-c", ONNXRUNTIME, str(model), str(tmp_path / "inputs.npy"),
               str(tmp_path / "outputs.npy")], tmp_path)
    return np.load(tmp_path / "outputs.npy"), json.loads(out.strip().splitlines()[-1])


def eval_logits(path):
    """Predicted classes and logits of `lockstep eval --predictions PATH --with_logits`, in record order."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header, rows = rows[0], rows[1:]
    first = header.index("logit_0")
    predicted = np.array([int(row[header.index("predicted_class")]) for row in rows])
    logits = np.array([[float(v) for v in row[first:]] for row in rows], dtype=np.float32)
    return predicted, logits


def fashion_mnist_test_images():
    """The test set's pixels as lockstep's reader gives them: pixel * (1/255) in float32, (N, 1, 28, 28)."""
    with gzip.open(os.path.join(FASHION_MNIST, "t10k-images-idx3-ubyte.gz")) as f:
        data = f.read()
    magic, count, rows, cols = struct.unpack(">IIII", data[:16])
    assert magic == 2051
    pixels = np.frombuffer(data, dtype=np.uint8, offset=16).reshape(count, 1, rows, cols)
    return pixels.astype(np.float32) * np.float32(1.0 / 255.0)


def train(tmp_path, name, flags):
    run([CLI, "train", "--model", name, "--use_cpu", "--num_epochs", "1", "--save_model_name", name,
         "--file_store_path", ".", "--log_dir", "."] + flags, tmp_path)
    return tmp_path / f"{name}_1.safetensors"


def export(tmp_path, checkpoint, output, flags=()):
    """Runs `lockstep export`; returns its summary line's seconds and the file's bytes."""
    out = run([CLI, "export", "--load_model_path", str(checkpoint), "--output", str(output)] + list(flags),
              tmp_path)
    line = out.strip().splitlines()[-1]
    assert "checker passed" in line, out
    return float(line.rsplit(", ", 1)[1].rstrip(" s")), os.path.getsize(output)


@needs_fashion_mnist
def test_lenet_agrees_with_eval_on_all_fashion_mnist_test_images(tmp_path):
    # 200 steps: test accuracy about 0.68, so that the predictions spread over the classes.
    checkpoint = train(tmp_path, "lenet", ["--train_data", "fashion-mnist", "--batch_size", "64", "--epoch_size",
                                           "12800", "--base_learning_rate", "0.1", "--momentum", "0.9"])
    seconds, size = export(tmp_path, checkpoint, tmp_path / "lenet.onnx", ["--test_data", "fashion-mnist"])
    run([CLI, "eval", "--model", "lenet", "--use_cpu", "--load_model_path", str(checkpoint), "--test_data",
         "fashion-mnist", "--batch_size", "100", "--predictions", "predictions.csv", "--with_logits"], tmp_path)
    predicted, logits = eval_logits(tmp_path / "predictions.csv")

    images = fashion_mnist_test_images()
    outputs, seen = onnxruntime(tmp_path / "lenet.onnx", images, tmp_path)
    assert seen["input"] == "data" and seen["output"] == "logits"
    assert seen["input_shape"][1:] == [1, 28, 28] and seen["input_type"] == "tensor(float)"
    assert "pixel * (1/255)" in seen["metadata"]["input_normalization"]
    assert seen["metadata"]["input_layout"] == "NCHW"
    assert outputs.shape == logits.shape == (10000, 10)
    agree = int((outputs.argmax(axis=1) == predicted).sum())
    worst = float(np.abs(outputs - logits).max())
    print(f"LeNet: top-1 identical on {agree} of 10000 images, max |logit difference| {worst:.3g}; "
          f"export {seconds:.2f} s, {size} bytes")
    assert agree == 10000
    assert worst <= 1e-4
    assert len(set(predicted)) == 10


def write_image_database(tmp_path, count, seed):
    """An LMDB of `count` 32 x 32 colour images with random labels, through `lockstep make-db` from a CIFAR-10
    batch file (records: label, then the R, G and B planes). Each image is its own colour plus noise of its
    own strength, so the network's answers differ from image to image. Returns the images as the network
    sees them: (count, 3, 32, 32) uint8 in BGR order, as make-db stores raw colour."""
    rng = np.random.default_rng(seed)
    colour = rng.uniform(0, 255, size=(count, 3, 1, 1))
    strength = rng.uniform(10, 80, size=(count, 1, 1, 1))
    planes = np.clip(colour + strength * rng.standard_normal((count, 3, 32, 32)), 0, 255).astype(np.uint8)
    labels = rng.integers(0, 10, size=(count, 1), dtype=np.uint8)
    (tmp_path / "batch.bin").write_bytes(np.concatenate([labels, planes.reshape(count, -1)], axis=1).tobytes())
    run([CLI, "make-db", "--cifar10", "batch.bin", "--output", "images"], tmp_path)
    return planes[:, ::-1]


def write_resnet50_checkpoint(path, images, seed):
    """A checkpoint in the trainer's format of ResNet-50 (3 x 32 x 32 inputs, 10 labels) with its initial
    weights and random batch-norm scales, biases and running statistics, so that each of BatchNormalization's
    inputs counts in the comparison. The last layer's bias centres the logits of `images`: what the images
    share no longer decides their class, so the answers spread over the classes."""
    from lockstep import model_helper, models, workspace
    from lockstep._core import C

    model = model_helper.ModelHelper(name="resnet50", seed=seed)
    logits = models.build("resnet50", model, "data", num_channels=3, image_size=32, num_labels=10, is_test=True)
    workspace.RunNetOnce(model.param_init_net)
    rng = np.random.default_rng(seed)
    names = [str(p) for p in model.GetAllParams()]
    for name in names:
        shape = workspace.FetchBlob(name).shape
        if name.endswith("_bn_s"):
            workspace.FeedBlob(name, rng.uniform(0.5, 1.5, shape).astype(np.float32))
        elif name.endswith("_bn_b") or name.endswith("_bn_rm"):
            workspace.FeedBlob(name, rng.normal(0, 0.2, shape).astype(np.float32))
        elif name.endswith("_bn_riv"):
            workspace.FeedBlob(name, rng.uniform(0.5, 2.0, shape).astype(np.float32))
    workspace.FeedBlob("data", images)
    workspace.RunNetOnce(model.net)
    workspace.FeedBlob("last_out_b", -workspace.FetchBlob(str(logits)).mean(axis=0))
    state = dict(model="resnet50", epochs_done=0, iteration=0, epoch_iteration=0, reader_position=0, seed=seed,
                 images_trained=0, training_milliseconds=0)
    C.save_checkpoint(str(path), workspace.CurrentWorkspace(), "", names, state)


def test_resnet50_agrees_with_eval_on_64_images(tmp_path):
    pixels = write_image_database(tmp_path, 64, seed=5)
    # The network's input, as the model's metadata documents it.
    images = (np.ascontiguousarray(pixels).astype(np.float32) - np.float32(128)) / np.float32(128)
    checkpoint = tmp_path / "resnet50.safetensors"
    write_resnet50_checkpoint(checkpoint, images, seed=5)
    # --scale equal to --image_size: the reader neither resizes nor crops the 32 x 32 images.
    geometry = ["--image_size", "32", "--scale", "32", "--num_channels", "3", "--num_labels", "10"]
    seconds, size = export(tmp_path, checkpoint, tmp_path / "resnet50.onnx", ["--test_data", "images"] + geometry)
    run([CLI, "eval", "--model", "resnet50", "--use_cpu", "--load_model_path", str(checkpoint), "--test_data",
         "images", "--batch_size", "16", "--predictions", "predictions.csv", "--with_logits"] + geometry, tmp_path)
    predicted, logits = eval_logits(tmp_path / "predictions.csv")

    outputs, seen = onnxruntime(tmp_path / "resnet50.onnx", images, tmp_path)
    assert "(pixel[c] - 128) / 128, channels in BGR order" in seen["metadata"]["input_normalization"]
    assert seen["metadata"]["model"] == "resnet50"
    assert outputs.shape == logits.shape == (64, 10)
    agree = int((outputs.argmax(axis=1) == predicted).sum())
    top2 = np.sort(logits, axis=1)[:, -2:]
    print(f"ResNet-50: top-1 identical on {agree} of 64 images ({len(set(predicted))} distinct classes, the "
          f"closest second logit {float((top2[:, 1] - top2[:, 0]).min()):.3g} below the first), max |logit "
          f"difference| {float(np.abs(outputs - logits).max()):.3g}; export {seconds:.2f} s, {size} bytes")
    assert agree == 64
    assert len(set(predicted)) > 1, "every image got the same class: the comparison would say little"
    assert float(np.abs(outputs - logits).max()) <= 1e-3


def test_export_onnx_from_python(tmp_path):
    from lockstep import brew, export_onnx, model_helper, workspace
    from lockstep._core import InvalidInput

    model = model_helper.ModelHelper(name="small", seed=3)
    x = brew.conv(model, "data", "conv", 3, 8, 3, pad=1)
    x = brew.spatial_bn(model, x, "bn", 8, is_test=True)
    x = brew.relu(model, x, x)
    x = brew.average_pool(model, x, "pool", global_pooling=True)
    x = brew.fc(model, x, "fc", 8, 4)
    workspace.RunNetOnce(model.param_init_net)
    summary = export_onnx(tmp_path / "small.onnx", net=model.net, input="data", input_shape=(2, 3, 8, 8),
                          output=x, softmax=True, metadata={"purpose": "test"})
    assert summary["checker"] == "passed"
    assert summary["node_types"] == ["Conv", "BatchNormalization", "Relu", "GlobalAveragePool", "Flatten", "Gemm",
                                     "Softmax"]

    images = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    workspace.FeedBlob("data", images)
    workspace.RunNetOnce(model.net)
    logits = workspace.FetchBlob(str(x))
    expected = np.exp(logits - logits.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    outputs, seen = onnxruntime(tmp_path / "small.onnx", images, tmp_path)
    assert seen["output"] == "probabilities" and seen["metadata"]["purpose"] == "test"
    np.testing.assert_allclose(outputs, expected, atol=1e-6)

    # A misspelled input would leave the graph computing from the fed 'data' baked in as a constant.
    with pytest.raises(InvalidInput, match=r"^export: no operator on the way to 'fc' reads the input 'dat'; "
                                           r"name the blob the network starts from \(it reads .*\bdata\b"):
        export_onnx(tmp_path / "typo.onnx", net=model.net, input="dat", input_shape=(2, 3, 8, 8), output=x)
    assert not (tmp_path / "typo.onnx").exists()

    model.net.Cast(x, "half", to=12)
    with pytest.raises(InvalidInput, match=r"^export: operator 'Cast' \(op 5, output 'half'\) has no ONNX mapping"):
        export_onnx(tmp_path / "cast.onnx", net=model.net, input="data", input_shape=(2, 3, 8, 8), output="half")
    assert not (tmp_path / "cast.onnx").exists()


def test_every_mapped_operator_agrees_with_onnxruntime(tmp_path):
    """One net through every mapped operator and the arguments the translation reads (a strided, padded,
    grouped Conv; BN; in-place ReLU; both poolings with padding; LeakyRelu, Scale, Sum, Add with broadcast,
    Concat, Copy, Dropout, Reshape, FC at axis 2 and on 3-D data at axis 1), run by lockstep and by
    onnxruntime on the same random input."""
    from lockstep import brew, export_onnx, model_helper, workspace

    model = model_helper.ModelHelper(name="every_op", seed=7)
    net = model.net
    x = brew.conv(model, "data", "conv", 4, 8, 3, stride=2, pad=1, group=2)  # (N, 8, 8, 8)
    x = brew.spatial_bn(model, x, "bn", 8, is_test=True)
    x = brew.relu(model, x, x)
    left = brew.max_pool(model, x, "max", kernel=3, stride=1, pad=1)
    right = net.AveragePool(x, "average", kernel=3, stride=1, pad=1, count_include_pad=1)
    right = net.LeakyRelu(right, "leaky", alpha=0.2)
    right = brew.scale(model, right, "scaled", scale=-1.5)
    both = net.Sum([left, right, x], "sum")
    plane_bias = model.create_param("plane_bias", [8, 8], ("GaussianFill", {"std": 1.0}), tags="bias")
    both = net.Add([both, plane_bias], "biased", broadcast=1)
    joined, _ = net.Concat([both, x], ["joined", "joined_info"], axis=1)  # (N, 16, 8, 8)
    joined = net.Copy(joined, "copied")
    joined = brew.dropout(model, joined, "dropped", ratio=0.5, is_test=True)
    rows = net.Reshape(joined, "rows", shape=[0, 16, -1])  # (N, 16, 64)
    w = model.create_param("per_row_w", [5, 64], ("XavierFill", {}), tags="weight")
    b = model.create_param("per_row_b", [5], ("GaussianFill", {"std": 1.0}), tags="bias")
    per_row = net.FC([rows, w, b], "per_row", axis=2)  # (N, 16, 5)
    logits = brew.fc(model, per_row, "logits", 16 * 5, 4)  # (N, 4)
    workspace.RunNetOnce(model.param_init_net)
    summary = export_onnx(tmp_path / "every.onnx", net=model.net, input="data", input_shape=(3, 4, 16, 16),
                          output=logits)
    assert summary["checker"] == "passed"
    assert summary["node_types"] == ["Conv", "BatchNormalization", "Relu", "MaxPool", "AveragePool", "LeakyRelu",
                                     "Mul", "Sum", "Add", "Concat", "Reshape", "Flatten", "Gemm", "Reshape",
                                     "Flatten", "Gemm"]

    images = np.random.default_rng(1).standard_normal((3, 4, 16, 16)).astype(np.float32)
    workspace.FeedBlob("data", images)
    workspace.RunNetOnce(model.net)
    expected = workspace.FetchBlob(str(logits))
    outputs, _ = onnxruntime(tmp_path / "every.onnx", images, tmp_path)
    assert outputs.shape == expected.shape == (3, 4)
    np.testing.assert_allclose(outputs, expected, rtol=1e-4, atol=1e-4)
