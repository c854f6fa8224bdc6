#!/usr/bin/python3
"""Runs the d2l LeNet / Fashion-MNIST recipe in lockstep and in PyTorch and prints accuracy and speed side by side.

Both sides get the same thread count. Rounds alternate lockstep and PyTorch; each side's best round (lowest
mean seconds per epoch) is reported, with the lockstep/PyTorch time ratio (target <= 0.6).
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_common import (BENCH_DIR, add_common_arguments, alternate_rounds, mean, peer_description,  # noqa: E402
                            print_table, repeat_warnings, require_lockstep)

LENET_TIME_RATIO_TARGET = 0.6


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(parser, default_rounds=1)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--lr", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--limit", type=int, default=None,
                        help="train on N images per epoch (PyTorch: the first N; lockstep: --epoch_size N)")
    args = parser.parse_args()
    if min(args.threads, args.rounds, args.epochs, args.batch_size) < 1 or (args.limit is not None and args.limit < 1):
        parser.error("--threads, --rounds, --epochs, --batch_size and --limit must be positive")
    return args


def main():
    args = parse_args()
    require_lockstep(args.lockstep)

    lockstep_arguments = ["--model", "lenet", "--train_data", "fashion-mnist", "--test_data", "fashion-mnist",
                          "--use_cpu", "--num_gpus", "1",
                          "--batch_size", str(args.batch_size), "--base_learning_rate", repr(args.lr),
                          "--momentum", "0", "--weight_decay", "0", "--num_epochs", str(args.epochs),
                          "--threads", str(args.threads), "--seed", str(args.seed)]
    peer_command = [args.python, os.path.join(BENCH_DIR, "lenet_peer.py"), "--threads", str(args.threads),
                    "--epochs", str(args.epochs), "--batch_size", str(args.batch_size), "--lr", repr(args.lr),
                    "--seed", str(args.seed)]
    if args.limit is not None:
        lockstep_arguments += ["--epoch_size", str(args.limit)]
        peer_command += ["--limit", str(args.limit)]

    rows, results, peer_outputs = alternate_rounds(args, [("lockstep", lockstep_arguments)], "lenet",
                                                   [("pytorch", peer_command)], "lenet_peer.py")
    rows, results = rows["lockstep"], results["pytorch"]
    # Per round: (mean seconds per epoch, final test accuracy, images per epoch).
    ours = [(mean([row["time_spent"] for row in r]), r[-1]["test_accuracy"], r[-1]["input_count"]) for r in rows]
    theirs = [(mean(r["seconds_per_epoch"]), r["test_accuracy"], r["images_per_epoch"]) for r in results]

    for index, (a, b) in enumerate(zip(ours, theirs)):
        print(f"round {index + 1}: lockstep {a[0]:.2f} s/epoch, test acc {a[1]:.4f} | "
              f"pytorch {b[0]:.2f} s/epoch, test acc {b[1]:.4f}")
    best_ours, best_theirs = min(ours), min(theirs)
    ratio = best_ours[0] / best_theirs[0]

    def accuracy_text(value):
        return "n/a" if value < 0 else f"{value:.4f}"

    print_table(f"LeNet on Fashion-MNIST: batch {args.batch_size}, lr {args.lr}, {args.epochs} epoch(s), "
                f"{args.threads} threads, ISA {args.isa}, best of {args.rounds} round(s)",
                [("test accuracy (final epoch)", accuracy_text(best_ours[1]), accuracy_text(best_theirs[1])),
                 ("seconds/epoch (mean)", f"{best_ours[0]:.2f}", f"{best_theirs[0]:.2f}"),
                 ("images/epoch", f"{best_ours[2]:.0f}", f"{best_theirs[2]:.0f}"),
                 ("images/sec", f"{best_ours[2] / best_ours[0]:.0f}", f"{best_theirs[2] / best_theirs[0]:.0f}")])
    print(f"peer: {peer_description(results[0])}")
    if best_ours[1] >= 0:
        print(f"test accuracy, lockstep - pytorch: {best_ours[1] - best_theirs[1]:+.4f}")
    verdict = "met" if ratio <= LENET_TIME_RATIO_TARGET else "NOT met"
    print(f"seconds/epoch, lockstep/pytorch: {ratio:.3f} (target <= {LENET_TIME_RATIO_TARGET}: {verdict})")
    if abs(best_ours[2] - best_theirs[2]) > 0.01 * best_theirs[2]:
        print("note: the two sides trained on different numbers of images per epoch; compare images/sec too")
    repeat_warnings(*peer_outputs)
    print(json.dumps({"benchmark": "lenet", "threads": args.threads, "rounds": args.rounds, "epochs": args.epochs,
                      "isa": args.isa, "lockstep": {"test_accuracy": best_ours[1], "seconds_per_epoch": best_ours[0]},
                      "pytorch": {"test_accuracy": best_theirs[1], "seconds_per_epoch": best_theirs[0],
                                  "torch": results[0]["torch"]},
                      "time_ratio": ratio, "time_ratio_target": LENET_TIME_RATIO_TARGET}))


if __name__ == "__main__":
    main()
