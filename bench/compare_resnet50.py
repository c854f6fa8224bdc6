#!/usr/bin/python3
"""Compares ResNet-50 training throughput (synthetic data, CPU) of lockstep and PyTorch.

Both sides get the same thread count and the same work: one untimed warm-up chunk, then --chunks timed
chunks of --iterations steps (lockstep: one epoch per chunk with --epoch_size batch*iterations, the first
epoch being the warm-up). PyTorch runs in each --memory_formats layout (default NCHW and channels_last) and its
best configuration is the peer. Each --dtypes entry (default float) adds one lockstep configuration
(`--dtype D`) and one PyTorch configuration per layout: float32 (`--autocast none`) for float, bfloat16 CPU
autocast with float32 parameters (`--autocast bfloat16`) for bfloat16. Rounds run every configuration, their
order rotating from round to round; each configuration's best chunk over all rounds is reported, with, per
dtype, the lockstep/PyTorch-best images/sec ratio of that dtype (targets: float >= 1.2, bfloat16 >= 1.3) and,
when both dtypes ran, lockstep bfloat16 / lockstep float (target >= 1.5).
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_common import (BENCH_DIR, add_common_arguments, alternate_rounds, peer_description,  # noqa: E402
                            print_table, repeat_warnings, require_lockstep)

MEMORY_FORMATS = ("contiguous", "channels_last")
MEMORY_FORMAT_NAMES = {"contiguous": "NCHW", "channels_last": "channels_last"}
DTYPES = ("float", "bfloat16")
# Per dtype: the peer's --autocast, the suffix that keeps its configurations' names apart, the title's words
# and the lockstep/PyTorch-best target.
PEER_AUTOCAST = {"float": "none", "bfloat16": "bfloat16"}
NAME_SUFFIX = {"float": "", "bfloat16": " bfloat16"}
TITLE_DTYPE = {"float": "", "bfloat16": " in bfloat16 (lockstep --dtype bfloat16, PyTorch autocast)"}
SPEED_RATIO_TARGETS = {"float": 1.2, "bfloat16": 1.3}
BFLOAT16_SPEEDUP_TARGET = 1.5


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
    parser.add_argument("--dtypes", default="float",
                        help="data types to measure, comma-separated: float (lockstep --dtype float, PyTorch "
                             "float32), bfloat16 (lockstep --dtype bfloat16, PyTorch bfloat16 autocast) "
                             "(default %(default)s)")
    args = parser.parse_args()
    args.memory_formats = args.memory_formats.split(",")
    unknown = [name for name in args.memory_formats if name not in MEMORY_FORMATS]
    if unknown or len(set(args.memory_formats)) != len(args.memory_formats):
        parser.error(f"--memory_formats takes distinct names out of {', '.join(MEMORY_FORMATS)}")
    args.dtypes = args.dtypes.split(",")
    if any(name not in DTYPES for name in args.dtypes) or len(set(args.dtypes)) != len(args.dtypes):
        parser.error(f"--dtypes takes distinct names out of {', '.join(DTYPES)}")
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
    # Per dtype: lockstep's configuration name and the names of its PyTorch peers.
    lockstep_name = {dtype: "lockstep" + NAME_SUFFIX[dtype] for dtype in args.dtypes}
    peer_names = {dtype: [f"pytorch{NAME_SUFFIX[dtype]} {MEMORY_FORMAT_NAMES[name]}" for name in args.memory_formats]
                  for dtype in args.dtypes}
    lockstep_runs = [(lockstep_name[dtype], lockstep_arguments + ["--dtype", dtype]) for dtype in args.dtypes]
    peers = [(name, peer_command + ["--memory_format", memory_format, "--autocast", PEER_AUTOCAST[dtype]])
             for dtype in args.dtypes for name, memory_format in zip(peer_names[dtype], args.memory_formats)]

    rows, results, peer_outputs = alternate_rounds(args, lockstep_runs, "resnet50", peers, "resnet50_peer.py")
    # images/sec of every timed chunk; lockstep's first epoch is the warm-up.
    chunks = {name: [[row["inputs_per_sec"] for row in (r[1:] if len(r) > 1 else r)] for r in runs]
              for name, runs in rows.items()}
    chunks.update({name: [r["all"] for r in peer_rounds] for name, peer_rounds in results.items()})
    best = {name: max(max(values) for values in rounds) for name, rounds in chunks.items()}

    for dtype in args.dtypes:
        names = [lockstep_name[dtype]] + peer_names[dtype]
        for index in range(args.rounds):
            print(f"round {index + 1}: " + " | ".join(f"{name} {' '.join(f'{v:.2f}' for v in chunks[name][index])}"
                                                      for name in names) + " images/s")

    summary = {}
    for dtype in args.dtypes:
        ours = lockstep_name[dtype]
        names = [ours] + peer_names[dtype]
        best_name = max(peer_names[dtype], key=best.get)
        ratio = best[ours] / best[best_name]
        target = SPEED_RATIO_TARGETS[dtype]
        print_table(f"ResNet-50 training{TITLE_DTYPE[dtype]}, synthetic data: batch {args.batch_size}, "
                    f"{args.image_size}x{args.image_size}, {args.num_labels} labels, {args.threads} threads, ISA "
                    f"{args.isa}, best chunk of {args.rounds} round(s) x {args.chunks} chunk(s) x "
                    f"{args.iterations} step(s)",
                    [("images/sec (best)", *(f"{best[name]:.2f}" for name in names)),
                     ("seconds/step (best)", *(f"{args.batch_size / best[name]:.3f}" for name in names))],
                    names)
        first_result = results[peer_names[dtype][0]][0]
        print(f"peer: {peer_description(first_result)}; best configuration: {best_name}")
        verdict = "met" if ratio >= target else "NOT met"
        print(f"images/sec{NAME_SUFFIX[dtype]}, lockstep/pytorch-best: {ratio:.3f} (target >= {target}: {verdict})")
        summary[dtype] = {"lockstep": {"images_per_sec": best[ours], "all": chunks[ours]},
                          "pytorch": {"images_per_sec": best[best_name], "best_configuration": best_name,
                                      "torch": first_result["torch"],
                                      "configurations": {name: {"images_per_sec": best[name], "all": chunks[name]}
                                                         for name in peer_names[dtype]}},
                          "speed_ratio": ratio, "speed_ratio_target": target}
    if set(args.dtypes) == set(DTYPES):
        speedup = best[lockstep_name["bfloat16"]] / best[lockstep_name["float"]]
        verdict = "met" if speedup >= BFLOAT16_SPEEDUP_TARGET else "NOT met"
        print(f"images/sec, lockstep bfloat16/lockstep float: {speedup:.3f} (target >= {BFLOAT16_SPEEDUP_TARGET}: "
              f"{verdict})")
        summary["bfloat16_speedup"] = speedup
        summary["bfloat16_speedup_target"] = BFLOAT16_SPEEDUP_TARGET
    repeat_warnings(*peer_outputs)
    # float's figures stay at the top level, as before --dtypes; bfloat16's go under "bfloat16".
    print(json.dumps({"benchmark": "resnet50", "threads": args.threads, "rounds": args.rounds, "isa": args.isa,
                      **summary.pop("float", {}), **summary}))


if __name__ == "__main__":
    main()
