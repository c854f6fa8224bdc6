"""LeNet's forward pass in numpy, independent of lockstep: reads a lockstep checkpoint (safetensors: a
little-endian u64 header length, a JSON header, raw tensor bytes) and the Fashion-MNIST idx test files, and
writes, per test image in file order, "index,label,predicted_class,score,margin" to out.csv (float64 logits;
score is the softmax probability of the predicted class, margin the gap between the two highest logits).

Usage: lenet_reference.py CHECKPOINT FASHION_MNIST_DIR OUT_CSV
"""
import gzip
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "I32": np.int32, "I64": np.int64, "U8": np.uint8}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (header_size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + header_size])
    data = blob[8 + header_size :]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        array = np.frombuffer(data[begin:end], dtype=np.dtype(DTYPES[entry["dtype"]]).newbyteorder("<"))
        tensors[name] = array.reshape(entry["shape"])
    return tensors


def read_idx(path):
    with gzip.open(path, "rb") as f:
        blob = f.read()
    (magic,) = struct.unpack(">I", blob[:4])
    ndim = magic & 0xFF
    shape = struct.unpack(">" + "I" * ndim, blob[4 : 4 + 4 * ndim])
    return np.frombuffer(blob[4 + 4 * ndim :], dtype=np.uint8).reshape(shape)


def conv(x, w, b):
    # x is (N, C, H, W), w is (K, C, R, S); stride 1, no padding; returns (N, K, H-R+1, W-S+1).
    k, c, r, s = w.shape
    windows = np.lib.stride_tricks.sliding_window_view(x, (r, s), axis=(2, 3))  # (N, C, H', W', R, S)
    return np.einsum("nchwrs,kcrs->nkhw", windows, w, optimize=True) + b[None, :, None, None]


def average_pool(x):
    # 2x2 windows, stride 2, the last row and column dropped when odd (floor).
    n, c, h, w = x.shape
    x = x[:, :, : h // 2 * 2, : w // 2 * 2]
    return x.reshape(n, c, h // 2, 2, w // 2, 2).mean(axis=(3, 5))


def lenet(params, images):
    # images is (N, 1, 28, 28) float64; returns logits (N, labels).
    x = np.maximum(conv(images, params["conv1_w"], params["conv1_b"]), 0)
    x = average_pool(x)
    x = np.maximum(conv(x, params["conv2_w"], params["conv2_b"]), 0)
    x = average_pool(x).reshape(len(images), -1)  # NCHW flattened, as FC reads it
    x = np.maximum(x @ params["fc3_w"].T + params["fc3_b"], 0)
    return x @ params["fc4_w"].T + params["fc4_b"]


def main():
    checkpoint, data_dir, out_path = sys.argv[1:4]
    params = {name: t.astype(np.float64) for name, t in read_safetensors(checkpoint).items() if t.dtype == np.float32}
    images = read_idx(data_dir + "/t10k-images-idx3-ubyte.gz")
    labels = read_idx(data_dir + "/t10k-labels-idx1-ubyte.gz")
    # lockstep's DatasetSource: pixel * (1 / 255) in float32.
    pixels = (images.astype(np.float32) * np.float32(1.0 / 255.0)).astype(np.float64)[:, None, :, :]
    rows = ["index,label,predicted_class,score,margin"]
    for first in range(0, len(pixels), 500):
        logits = lenet(params, pixels[first : first + 500])
        predicted = logits.argmax(axis=1)
        top = np.sort(logits, axis=1)
        shifted = np.exp(logits - top[:, -1:])
        score = 1.0 / shifted.sum(axis=1)
        for i in range(len(logits)):
            rows.append(
                f"{first + i},{labels[first + i]},{predicted[i]},{score[i]:.12g},{top[i, -1] - top[i, -2]:.12g}"
            )
    with open(out_path, "w") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
