#!/usr/bin/env python3
"""PyTorch peer for the GPU ResNet-50 training-throughput benchmark (synthetic data, one CUDA device).

For each batch size, precision and memory layout it builds ResNet-50 (torchvision's when torchvision is
installed, else the same network as written out in resnet50_peer.py), trains it with SGD (lr 0.1, momentum 0.9,
weight decay 1e-4, mean softmax cross-entropy) on one fixed batch of random images and labels (the peer of
lockstep's `--train_data null`), runs --warmup untimed steps, then times --steps steps between two
torch.cuda.synchronize() calls. cudnn.benchmark is on, so the warm-up also picks the convolution algorithms.

Precisions:
  fp32      float32 with TF32 off for convolutions and matrix products
  tf32      float32 with TF32 on
  amp_bf16  autocast to bfloat16 (TF32 on for what stays float32)
  amp_fp16  autocast to float16 with a GradScaler (TF32 on for what stays float32)
Layouts: nchw, and channels_last (model and images in torch.channels_last).

Each measurement prints one line that bench/gpu_resnet50.sh reads:
  result <precision> <layout> <batch size> <class: fp32 or mixed> <images/s> (<ms>/step, loss <loss>)
Run it with the python3 that has PyTorch built with CUDA (on the GPU machine, plain python3).
"""

import argparse
import contextlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

PRECISIONS = ("fp32", "tf32", "amp_bf16", "amp_fp16")
LAYOUTS = ("nchw", "channels_last")


def names_from(choices):
    def parse(text):
        names = [name for name in text.split(",") if name]
        unknown = [name for name in names if name not in choices]
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"expected names from {', '.join(choices)}, comma-separated; got '{text}'")
        return names
    return parse


def positive_integers(text):
    try:
        values = [int(value) for value in text.split(",") if value]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, comma-separated; got '{text}'")
    return values


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch_sizes", type=positive_integers, default=[64, 128],
                        help="comma-separated (default 64,128)")
    parser.add_argument("--precisions", type=names_from(PRECISIONS), default=list(PRECISIONS),
                        help=f"comma-separated, from {','.join(PRECISIONS)} (default all)")
    parser.add_argument("--layouts", type=names_from(LAYOUTS), default=list(LAYOUTS),
                        help=f"comma-separated, from {','.join(LAYOUTS)} (default both)")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps per measurement (default 20)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps before each measurement (default 5)")
    parser.add_argument("--image_size", type=int, default=224)
    parser.add_argument("--num_labels", type=int, default=1000)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--weight_decay", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if min(args.steps, args.image_size, args.num_labels) < 1:
        parser.error("--steps, --image_size and --num_labels must be positive")
    if args.warmup < 0:
        parser.error("--warmup must be >= 0")
    return args


def resnet50_builder(torch):
    """Returns a function num_labels -> ResNet-50, and where its definition comes from."""
    try:
        import torchvision
        from torchvision.models import resnet50
    except ImportError:
        from resnet50_peer import build_resnet50
        return lambda num_labels: build_resnet50(torch, num_labels), "resnet50_peer.py"
    return (lambda num_labels: resnet50(weights=None, num_classes=num_labels),
            f"torchvision {torchvision.__version__}")


def set_tf32(torch, enabled):
    """TF32 for cuDNN convolutions and cuBLAS matrix products: the fp32_precision settings of PyTorch 2.9 and
    later, which deprecate the allow_tf32 flags that older versions have."""
    conv = getattr(torch.backends.cudnn, "conv", None)
    if conv is not None and hasattr(conv, "fp32_precision"):
        precision = "tf32" if enabled else "ieee"
        torch.backends.cudnn.conv.fp32_precision = precision
        torch.backends.cuda.matmul.fp32_precision = precision
    else:
        torch.backends.cudnn.allow_tf32 = enabled
        torch.backends.cuda.matmul.allow_tf32 = enabled


def measure(torch, build_resnet50, args, batch_size, precision, layout):
    """Trains a fresh model for --warmup then --steps steps; returns (images/s, seconds per step, last loss)."""
    F = torch.nn.functional
    set_tf32(torch, precision != "fp32")
    memory_format = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    model = build_resnet50(args.num_labels).cuda().to(memory_format=memory_format)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)
    images = torch.randn(batch_size, 3, args.image_size, args.image_size, device="cuda")
    images = images.contiguous(memory_format=memory_format)
    labels = torch.randint(0, args.num_labels, (batch_size,), device="cuda")
    autocast_dtype = {"amp_bf16": torch.bfloat16, "amp_fp16": torch.float16}.get(precision)
    # bfloat16 has float32's range, so only float16 needs its gradients scaled.
    scaler = torch.amp.GradScaler("cuda") if precision == "amp_fp16" else None

    def train_step():
        autocast = (torch.autocast("cuda", dtype=autocast_dtype) if autocast_dtype is not None
                    else contextlib.nullcontext())
        with autocast:
            loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        return loss

    torch.cuda.reset_peak_memory_stats()
    for _ in range(args.warmup):
        train_step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = train_step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak_mib = torch.cuda.max_memory_reserved() / 2**20
    return batch_size * args.steps / seconds, seconds / args.steps, loss.item(), peak_mib


def main():
    args = parse_args()
    try:
        import torch
    except ImportError:
        print(f"error: {sys.executable} has no torch; run this with the python3 that has PyTorch built with CUDA",
              file=sys.stderr)
        sys.exit(2)
    if not torch.cuda.is_available():
        print(f"error: PyTorch {torch.__version__} sees no CUDA device; run this on the GPU machine with the python3 "
              f"that has PyTorch built with CUDA", file=sys.stderr)
        sys.exit(2)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.benchmark = True
    build_resnet50, source = resnet50_builder(torch)
    print(f"pytorch {torch.__version__}, ResNet-50 from {source}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}: {args.image_size}x{args.image_size}, {args.num_labels} labels, "
          f"{args.warmup} warm-up + {args.steps} timed steps per measurement", flush=True)

    for batch_size in args.batch_sizes:
        for precision in args.precisions:
            for layout in args.layouts:
                images_per_sec, seconds_per_step, loss, peak_mib = measure(torch, build_resnet50, args, batch_size, precision,
                                                                 layout)
                precision_class = "mixed" if precision.startswith("amp_") else "fp32"
                print(f"result {precision} {layout} {batch_size} {precision_class} {images_per_sec:.2f} "
                      f"({seconds_per_step * 1000:.1f} ms/step, loss {loss:.4f}, peak {peak_mib:.0f} MiB reserved)", flush=True)


if __name__ == "__main__":
    main()
