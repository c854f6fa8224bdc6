#!/usr/bin/python3
"""PyTorch peer for the ResNet-50 training-throughput benchmark (synthetic data, CPU).

Standard bottleneck ResNet-50 v1 (stride on the 3x3 conv, as torchvision), SGD with momentum 0.9, weight
decay 1e-4, lr 0.1, mean softmax cross-entropy, on one fixed batch of random images and labels (the peer of
lockstep's `--train_data null`). After --warmup untimed steps it times --chunks chunks of --iterations steps
each and reports every chunk's images/sec and the best. --memory_format channels_last keeps the weights and the
images in NHWC, which lets oneDNN skip the reorders it does around NCHW tensors (often faster on CPU).
--autocast bfloat16 runs the forward pass and the loss under torch.autocast("cpu", dtype=torch.bfloat16), with
float32 parameters and optimizer: PyTorch's recommended mixed precision on CPU.

Run with the interpreter of bench/setup_torch.sh's environment (bench/.venv/bin/python, current PyTorch from
PyPI) or with Debian's /usr/bin/python3 (python3-torch 1.13).
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_setup import describe_line, describe_torch, import_torch  # noqa: E402

MEMORY_FORMATS = ("contiguous", "channels_last")
AUTOCASTS = ("none", "bfloat16")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="intra-op and inter-op threads (default 2)")
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--image_size", type=int, default=224)
    parser.add_argument("--num_labels", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=5, help="training steps per timed chunk")
    parser.add_argument("--chunks", type=int, default=3, help="number of timed chunks")
    parser.add_argument("--warmup", type=int, default=2, help="untimed training steps before the first chunk")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--weight_decay", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--memory_format", choices=MEMORY_FORMATS, default="contiguous",
                        help="layout of weights and images: contiguous (NCHW) or channels_last (NHWC)")
    parser.add_argument("--autocast", choices=AUTOCASTS, default="none",
                        help="none (float32), or bfloat16: forward pass and loss under CPU autocast, float32 "
                             "parameters and optimizer")
    args = parser.parse_args()
    if min(args.threads, args.batch_size, args.image_size, args.num_labels, args.iterations, args.chunks) < 1:
        parser.error("--threads, --batch_size, --image_size, --num_labels, --iterations and --chunks "
                     "must be positive")
    if args.warmup < 0:
        parser.error("--warmup must be >= 0")
    return args


def build_resnet50(torch, num_labels):
    nn = torch.nn

    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, in_channels, width, stride):
            super().__init__()
            out_channels = width * self.expansion
            self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(out_channels)
            self.relu = nn.ReLU(inplace=True)
            self.shortcut = None
            if stride != 1 or in_channels != out_channels:
                self.shortcut = nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                                              nn.BatchNorm2d(out_channels))

        def forward(self, x):
            identity = x if self.shortcut is None else self.shortcut(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            return self.relu(out + identity)

    layers = [nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
              nn.MaxPool2d(3, stride=2, padding=1)]
    in_channels = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for block in range(blocks):
            layers.append(Bottleneck(in_channels, width, stride if block == 0 else 1))
            in_channels = width * Bottleneck.expansion
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(in_channels, num_labels)]
    model = nn.Sequential(*layers)

    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(module, nn.BatchNorm2d):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
    return model


def main():
    args = parse_args()
    torch = import_torch(args.threads, args.seed)
    F = torch.nn.functional

    memory_format = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}[args.memory_format]
    model = build_resnet50(torch, args.num_labels).to(memory_format=memory_format)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)
    images = torch.randn(args.batch_size, 3, args.image_size, args.image_size).contiguous(
        memory_format=memory_format)
    labels = torch.randint(0, args.num_labels, (args.batch_size,))

    def train_step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast == "bfloat16"):
            loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    description = describe_torch(torch)
    print(f"{describe_line(description)} resnet50: batch {args.batch_size}, {args.image_size}x{args.image_size}, "
          f"{args.num_labels} labels, {args.memory_format}, autocast {args.autocast}, {args.threads} threads, "
          f"{args.warmup} warm-up steps, {args.chunks} x {args.iterations} timed steps", flush=True)
    for _ in range(args.warmup):
        train_step()

    images_per_sec = []
    for chunk in range(args.chunks):
        start = time.perf_counter()
        for _ in range(args.iterations):
            loss = train_step()
        loss_value = loss.item()
        seconds = time.perf_counter() - start
        images_per_sec.append(args.batch_size * args.iterations / seconds)
        print(f"chunk {chunk + 1}/{args.chunks}: {images_per_sec[-1]:.2f} images/s, "
              f"{seconds / args.iterations:.3f} s/step, loss {loss_value:.4f}", flush=True)

    print(json.dumps({
        "framework": "pytorch",
        "model": "resnet50",
        "threads": args.threads,
        "batch_size": args.batch_size,
        "image_size": args.image_size,
        "memory_format": args.memory_format,
        "autocast": args.autocast,
        "torch": description,
        "images_per_sec": max(images_per_sec),
        "all": images_per_sec,
    }), flush=True)


if __name__ == "__main__":
    main()
