#!/usr/bin/python3
"""Compares ResNet-50 training throughput (synthetic data, CPU) of lockstep and PyTorch.

Both sides get the same thread count and the same work: one untimed warm-up chunk, then --chunks timed
chunks of --iterations steps (lockstep: one epoch per chunk with --epoch_size batch*iterations, the first
epoch being the warm-up). Rounds alternate lockstep and PyTorch; each side's best chunk over all rounds is
reported, with the lockstep/PyTorch images/sec ratio (target >= 1.2).
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_common import (BENCH_DIR, add_common_arguments, alternate_rounds, print_table,  # noqa: E402
                            repeat_warnings, require_lockstep)

RESNET50_SPEED_RATIO_TARGET = 1.2


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(parser, default_rounds=3)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--image_size", type=int, default=224)
    parser.add_argument("--num_labels", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=5, help="training steps per chunk (default 5)")
    parser.add_argument("--chunks", type=int, default=3, help="timed chunks per run (default 3)")
    args = parser.parse_args()
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

    rows, results, peer_outputs = alternate_rounds(args, lockstep_arguments, "resnet50", peer_command,
                                                   "resnet50_peer.py")
    # images/sec of every timed chunk; lockstep's first epoch is the warm-up.
    ours = [[row["inputs_per_sec"] for row in (r[1:] if len(r) > 1 else r)] for r in rows]
    theirs = [r["all"] for r in results]

    for index, (a, b) in enumerate(zip(ours, theirs)):
        print(f"round {index + 1}: lockstep {' '.join(f'{v:.2f}' for v in a)} images/s | "
              f"pytorch {' '.join(f'{v:.2f}' for v in b)} images/s")
    best_ours = max(max(chunks) for chunks in ours)
    best_theirs = max(max(chunks) for chunks in theirs)
    ratio = best_ours / best_theirs

    print_table(f"ResNet-50 training, synthetic data: batch {args.batch_size}, {args.image_size}x{args.image_size}, "
                f"{args.num_labels} labels, {args.threads} threads, best chunk of {args.rounds} round(s) x "
                f"{args.chunks} chunk(s) x {args.iterations} step(s)",
                [("images/sec (best)", f"{best_ours:.2f}", f"{best_theirs:.2f}"),
                 ("seconds/step (best)", f"{args.batch_size / best_ours:.3f}", f"{args.batch_size / best_theirs:.3f}")])
    verdict = "met" if ratio >= RESNET50_SPEED_RATIO_TARGET else "NOT met"
    print(f"images/sec, lockstep/pytorch: {ratio:.3f} (target >= {RESNET50_SPEED_RATIO_TARGET}: {verdict})")
    repeat_warnings(*peer_outputs)
    print(json.dumps({"benchmark": "resnet50", "threads": args.threads, "rounds": args.rounds,
                      "lockstep": {"images_per_sec": best_ours, "all": ours},
                      "pytorch": {"images_per_sec": best_theirs, "all": theirs},
                      "speed_ratio": ratio, "speed_ratio_target": RESNET50_SPEED_RATIO_TARGET}))


if __name__ == "__main__":
    main()
