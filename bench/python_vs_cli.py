#!/usr/bin/python3
"""Training throughput of the Python front-end against the command line: examples/python/resnet50_trainer.py
(the model built by Python builder functions and data_parallel_model.Parallelize) and `lockstep train`, with
the same flags, alternated over several rounds; prints each side's best images/s of a steady epoch (the last
of each run) and the ratio. Python only builds the graph, so the ratio should be 1."""
import argparse
import csv
import glob
import os
import subprocess
import sys
import tempfile

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)


def last_epoch_rate(log_dir):
    logs = glob.glob(os.path.join(log_dir, "*.log"))
    if len(logs) != 1:
        sys.exit(f"error: expected one CSV log in {log_dir}, found {len(logs)}")
    with open(logs[0]) as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    return float(rows[-1]["inputs_per_sec"])


def run(command, env, log_dir):
    result = subprocess.run(command + ["--log_dir", log_dir], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        sys.exit(f"error: {' '.join(command)} failed:\n{result.stdout}")
    return last_epoch_rate(log_dir)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", default=os.path.join(REPO_ROOT, "build"), help="build folder (default build/)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--num_gpus", type=int, default=1, help="CPU devices (default 1)")
    parser.add_argument("--epoch_size", type=int, default=160, help="images per epoch (default 160)")
    args = parser.parse_args()
    flags = ["--model", args.model, "--train_data", "null", "--use_cpu", "--num_gpus", str(args.num_gpus),
             "--batch_size", str(args.batch_size), "--epoch_size", str(args.epoch_size), "--num_epochs", "2"]
    env = dict(os.environ, PYTHONPATH=os.path.join(args.build, "python"))
    sides = {
        "lockstep train": [os.path.join(args.build, "lockstep"), "train"] + flags,
        "resnet50_trainer.py": ["/usr/bin/python3", os.path.join(REPO_ROOT, "examples", "python",
                                                                   "resnet50_trainer.py")] + flags,
    }
    best = {name: 0.0 for name in sides}
    with tempfile.TemporaryDirectory() as scratch:
        for round_index in range(args.rounds):
            for side, (name, command) in enumerate(sides.items()):
                log_dir = os.path.join(scratch, f"round{round_index}_side{side}")
                os.makedirs(log_dir)
                rate = run(command, env, log_dir)
                best[name] = max(best[name], rate)
                print(f"round {round_index + 1}: {name}: {rate:.2f} img/s", flush=True)
    cli, python = best["lockstep train"], best["resnet50_trainer.py"]
    print(f"{args.model}, batch {args.batch_size}, {args.num_gpus} CPU device(s), best of {args.rounds}: "
          f"CLI {cli:.2f} img/s, Python {python:.2f} img/s, Python/CLI {python / cli:.3f}")


if __name__ == "__main__":
    main()
