#!/usr/bin/python3
"""Compares ResNet-50 training throughput (synthetic data, CPU) of lockstep and PyTorch.

Both sides get the same thread count and the same work: one untimed warm-up chunk, then --chunks timed
chunks of --iterations steps (lockstep: one epoch per chunk with --epoch_size batch*iterations, the first
epoch being the warm-up). PyTorch runs in each --memory_formats layout (default NCHW and channels_last) and its
best configuration is the peer. Rounds alternate lockstep and the PyTorch configurations; each side's best chunk
over all rounds is reported, with the lockstep/PyTorch-best images/sec ratio (target >= 1.2).
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_common import (BENCH_DIR, add_common_arguments, alternate_rounds, peer_description,  # noqa: E402
                            print_table, repeat_warnings, require_lockstep)

RESNET50_SPEED_RATIO_TARGET = 1.2
MEMORY_FORMATS = ("contiguous", "channels_last")
MEMORY_FORMAT_NAMES = {"contiguous": "NCHW", "channels_last": "channels_last"}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(parser, default_rounds=3)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--image_size", type=int, default=224)
    parser.add_argument("--num_labels", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=5, help="training steps per chunk (default 5)")
    parser.add_argument("--chunks", type=int, default=3, help="timed chunks per run (default 3)")
    parser.add_argument("--memory_formats", default=",".join(MEMORY_FORMATS),
                        help="PyTorch layouts to measure, comma-separated: contiguous (NCHW), channels_last "
                             "(default %(default)s)")
    args = parser.parse_args()
    args.memory_formats = args.memory_formats.split(",")
    unknown = [name for name in args.memory_formats if name not in MEMORY_FORMATS]
    if unknown or len(set(args.memory_formats)) != len(args.memory_formats):
        parser.error(f"--memory_formats takes distinct names out of {', '.join(MEMORY_FORMATS)}")
    if min(args.threads, args.rounds, args.batch_size, args.image_size, args.num_labels, args.iterations,
           args.chunks) < 1:
        parser.error("all counts must be positive")
    return args


def main():
    args = parse_args()
    require_lockstep(args.lockstep)

    lockstep_arguments = ["--model", "resnet50", "--train_data", "null", "--use_cpu", "--num_gpus", "1",
                          "--batch_size", str(args.batch_size), "--image_size", str(args.image_size),
                          "--num_labels", str(args.num_labels), "--base_learning_rate", "0.1", "--momentum", "0.9",
                          "--weight_decay", "1e-4", "--epoch_size", str(args.batch_size * args.iterations),
                          "--num_epochs", str(args.chunks + 1), "--threads", str(args.threads)]
    peer_command = [args.python, os.path.join(BENCH_DIR, "resnet50_peer.py"), "--threads", str(args.threads),
                    "--batch_size", str(args.batch_size), "--image_size", str(args.image_size),
                    "--num_labels", str(args.num_labels), "--iterations", str(args.iterations),
                    "--chunks", str(args.chunks), "--warmup", str(args.iterations)]
    peers = [(f"pytorch {MEMORY_FORMAT_NAMES[name]}", peer_command + ["--memory_format", name])
             for name in args.memory_formats]

    rows, results, peer_outputs = alternate_rounds(args, lockstep_arguments, "resnet50", peers, "resnet50_peer.py")
    # images/sec of every timed chunk; lockstep's first epoch is the warm-up.
    ours = [[row["inputs_per_sec"] for row in (r[1:] if len(r) > 1 else r)] for r in rows]
    theirs = {name: [r["all"] for r in peer_rounds] for name, peer_rounds in results.items()}

    for index, chunks in enumerate(ours):
        print(f"round {index + 1}: lockstep {' '.join(f'{v:.2f}' for v in chunks)}"
              + "".join(f" | {name} {' '.join(f'{v:.2f}' for v in rounds[index])}" for name, rounds in theirs.items())
              + " images/s")
    best_ours = max(max(chunks) for chunks in ours)
    best_each = {name: max(max(chunks) for chunks in rounds) for name, rounds in theirs.items()}
    best_name = max(best_each, key=best_each.get)
    best_theirs = best_each[best_name]
    ratio = best_ours / best_theirs

    columns = ("lockstep",) + tuple(best_each)
    print_table(f"ResNet-50 training, synthetic data: batch {args.batch_size}, {args.image_size}x{args.image_size}, "
                f"{args.num_labels} labels, {args.threads} threads, ISA {args.isa}, best chunk of {args.rounds} "
                f"round(s) x {args.chunks} chunk(s) x {args.iterations} step(s)",
                [("images/sec (best)", f"{best_ours:.2f}", *(f"{v:.2f}" for v in best_each.values())),
                 ("seconds/step (best)", f"{args.batch_size / best_ours:.3f}",
                  *(f"{args.batch_size / v:.3f}" for v in best_each.values()))],
                columns)
    first_result = next(iter(results.values()))[0]
    print(f"peer: {peer_description(first_result)}; best configuration: {best_name}")
    verdict = "met" if ratio >= RESNET50_SPEED_RATIO_TARGET else "NOT met"
    print(f"images/sec, lockstep/pytorch-best: {ratio:.3f} (target >= {RESNET50_SPEED_RATIO_TARGET}: {verdict})")
    repeat_warnings(*peer_outputs)
    print(json.dumps({"benchmark": "resnet50", "threads": args.threads, "rounds": args.rounds, "isa": args.isa,
                      "lockstep": {"images_per_sec": best_ours, "all": ours},
                      "pytorch": {"images_per_sec": best_theirs, "best_configuration": best_name,
                                  "torch": first_result["torch"],
                                  "configurations": {name: {"images_per_sec": best_each[name], "all": theirs[name]}
                                                     for name in best_each}},
                      "speed_ratio": ratio, "speed_ratio_target": RESNET50_SPEED_RATIO_TARGET}))


if __name__ == "__main__":
    main()
