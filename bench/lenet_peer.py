#!/usr/bin/python3
"""PyTorch peer for the d2l LeNet benchmark: trains the d2l multi-GPU chapter's LeNet on Fashion-MNIST.

The recipe matches lockstep's `train --model lenet`: conv 20@3x3, relu, avgpool 2/2, conv 50@5x5, relu,
avgpool 2/2, fc 800->128, relu, fc 128->10; weights N(0, 0.01), biases 0; mean softmax cross-entropy; plain
SGD; images scaled to [0, 1]; a fresh shuffle every epoch. Only each epoch's training loop is timed.

Run with the interpreter of bench/setup_torch.sh's environment (bench/.venv/bin/python, current PyTorch from
PyPI, with numpy) or with Debian's /usr/bin/python3 (python3-torch 1.13 and python3-numpy).
"""

import argparse
import gzip
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_setup import describe_line, describe_torch, import_torch  # noqa: E402

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"

def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="intra-op and inter-op threads (default 2)")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--lr", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--limit", type=int, default=None,
                        help="train on the first N training images only (quick smoke runs)")
    parser.add_argument("--data_dir", default=FASHION_MNIST_DIR,
                        help="folder with the four Fashion-MNIST idx .gz files (default %(default)s)")
    args = parser.parse_args()
    if args.threads < 1 or args.epochs < 1 or args.batch_size < 1 or (args.limit is not None and args.limit < 1):
        parser.error("--threads, --epochs, --batch_size and --limit must be positive")
    return args


def read_idx(path):
    """Reads a gzipped idx file (big-endian header: magic, then one uint32 per dimension)."""
    import numpy as np
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    if magic >> 8 != 0x08:  # 0x08 = unsigned byte elements
        raise ValueError(f"{path}: not an unsigned-byte idx file (magic {magic:#x})")
    ndim = magic & 0xFF
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def load_fashion_mnist(torch, data_dir, split):
    """Returns (images N x 1 x 28 x 28 float32 in [0, 1], labels N int64) for split 'train' or 't10k'."""
    images = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(images.astype("float32") / 255.0).unsqueeze(1).contiguous()
    y = torch.from_numpy(labels.astype("int64"))
    return x, y


def build_lenet(torch):
    nn = torch.nn
    model = nn.Sequential(
        nn.Conv2d(1, 20, kernel_size=3), nn.ReLU(), nn.AvgPool2d(kernel_size=2, stride=2),   # 28 -> 26 -> 13
        nn.Conv2d(20, 50, kernel_size=5), nn.ReLU(), nn.AvgPool2d(kernel_size=2, stride=2),  # 13 -> 9 -> 4
        nn.Flatten(),
        nn.Linear(800, 128), nn.ReLU(),
        nn.Linear(128, 10),
    )
    with torch.no_grad():
        for module in model:
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                module.weight.normal_(0.0, 0.01)
                module.bias.zero_()
    return model


def evaluate(torch, model, images, labels, batch_size):
    correct = 0
    with torch.no_grad():
        for start in range(0, images.shape[0], batch_size):
            logits = model(images[start:start + batch_size])
            correct += (logits.argmax(dim=1) == labels[start:start + batch_size]).sum().item()
    return correct / images.shape[0]


def main():
    args = parse_args()
    torch = import_torch(args.threads, args.seed)
    F = torch.nn.functional

    train_x, train_y = load_fashion_mnist(torch, args.data_dir, "train")
    test_x, test_y = load_fashion_mnist(torch, args.data_dir, "t10k")
    if args.limit is not None:
        train_x, train_y = train_x[:args.limit], train_y[:args.limit]
    num_train = train_x.shape[0]

    model = build_lenet(torch)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.0, weight_decay=0.0)
    shuffle = torch.Generator().manual_seed(args.seed)

    description = describe_torch(torch)
    print(f"{describe_line(description)} lenet: {num_train} training images, batch {args.batch_size}, "
          f"lr {args.lr}, {args.epochs} epochs, {args.threads} threads", flush=True)
    seconds_per_epoch = []
    test_accuracy = 0.0
    for epoch in range(args.epochs):
        model.train()
        loss_sum = torch.zeros(())
        correct = torch.zeros((), dtype=torch.int64)
        start = time.perf_counter()
        order = torch.randperm(num_train, generator=shuffle)
        for first in range(0, num_train, args.batch_size):
            batch = order[first:first + args.batch_size]
            x, y = train_x[batch], train_y[batch]
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            loss_sum += loss.detach() * y.shape[0]
            correct += (logits.detach().argmax(dim=1) == y).sum()
        seconds = time.perf_counter() - start
        seconds_per_epoch.append(seconds)

        model.eval()
        test_accuracy = evaluate(torch, model, test_x, test_y, 1000)
        print(f"epoch {epoch + 1}/{args.epochs}: train loss {loss_sum.item() / num_train:.4f}, "
              f"train acc {correct.item() / num_train:.4f}, test acc {test_accuracy:.4f}, "
              f"{seconds:.2f} s ({num_train / seconds:.0f} images/s)", flush=True)

    print(json.dumps({
        "framework": "pytorch",
        "model": "lenet",
        "threads": args.threads,
        "batch_size": args.batch_size,
        "images_per_epoch": num_train,
        "torch": description,
        "test_accuracy": test_accuracy,
        "seconds_per_epoch": seconds_per_epoch,
    }), flush=True)


if __name__ == "__main__":
    main()
