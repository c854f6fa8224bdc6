#!/usr/bin/python3
"""Runs the d2l LeNet / Fashion-MNIST recipe in lockstep and in PyTorch and prints accuracy and speed side by side.

Both sides get the same thread count. Rounds alternate lockstep and PyTorch; each side's best round (lowest
mean seconds per epoch) is reported, with the lockstep/PyTorch time ratio (target <= 0.6).

The helpers here (finding the binary, streaming a run, reading lockstep's CSV log) are shared with
compare_resnet50.py.
"""

import argparse
import csv
import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
DEFAULT_LOCKSTEP = os.path.join(REPO_ROOT, "build", "lockstep")
DEFAULT_PEER_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

LOG_HEADER = ("time_spent,cumulative_time_spent,input_count,cumulative_input_count,cumulative_batch_count,"
              "inputs_per_sec,accuracy,epoch,learning_rate,loss,test_accuracy").split(",")

LENET_TIME_RATIO_TARGET = 0.6


class BenchError(Exception):
    """A run failed or produced output we cannot read; reported as one line."""


def add_common_arguments(parser, default_rounds):
    parser.add_argument("--lockstep", default=DEFAULT_LOCKSTEP, help="lockstep binary (default build/lockstep)")
    parser.add_argument("--python", default=DEFAULT_PEER_PYTHON,
                        help="interpreter with python3-torch for the PyTorch peer (default %(default)s)")
    parser.add_argument("--threads", type=int, default=2, help="threads for each side (default 2)")
    parser.add_argument("--rounds", type=int, default=default_rounds,
                        help="alternating lockstep/PyTorch rounds (default %(default)s)")
    parser.add_argument("--log_dir", default=None,
                        help="keep lockstep's logs in per-run folders under this folder (default: a temporary "
                             "folder, removed afterwards)")


def require_lockstep(path):
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        print(f"error: lockstep binary not found at {path}; build it with scripts/build.sh "
              f"(or pass --lockstep PATH)", file=sys.stderr)
        sys.exit(2)


def run_streaming(command, tag):
    """Runs command, echoing its merged stdout/stderr with a tag; returns the output text."""
    print(f"[{tag}] $ {shlex.join(command)}", flush=True)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines = []
    for line in process.stdout:
        lines.append(line)
        print(f"[{tag}] {line}", end="", flush=True)
    returncode = process.wait()
    if returncode != 0:
        raise BenchError(f"{tag} exited with status {returncode}: {shlex.join(command)}")
    return "".join(lines)


def last_json_line(output, tag):
    for line in reversed(output.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                break
    raise BenchError(f"{tag} printed no JSON result line")


def read_lockstep_log(log_dir, model):
    """Reads the single `{model}_gpu*_v2_*.log` CSV in log_dir; returns (argument line, rows as float dicts)."""
    paths = sorted(glob.glob(os.path.join(log_dir, f"{model}_gpu*_b*_L*_lr*_v2_*.log")))
    if len(paths) != 1:
        found = ", ".join(sorted(os.listdir(log_dir))) or "nothing"
        raise BenchError(f"expected one {model}_gpu*_v2_*.log in {log_dir}, found {len(paths)} (folder holds: "
                         f"{found})")
    path = paths[0]
    with open(path, newline="") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    if len(lines) < 2 or not lines[0].startswith("# "):
        raise BenchError(f"{path}: expected '# <arguments>' then the CSV header")
    reader = csv.reader(lines[1:])
    header = [name.strip() for name in next(reader)]
    if header != LOG_HEADER:
        raise BenchError(f"{path}: unexpected header {','.join(header)}")
    rows = []
    for number, values in enumerate(reader, start=3):
        if len(values) != len(header):
            raise BenchError(f"{path}:{number}: {len(values)} fields, expected {len(header)}")
        try:
            rows.append({name: float(value) for name, value in zip(header, values)})
        except ValueError as error:
            raise BenchError(f"{path}:{number}: {error}") from None
    if not rows:
        raise BenchError(f"{path}: no epoch rows")
    return lines[0][2:], rows


def run_lockstep(binary, arguments, model, log_parent, run_name):
    """Runs `lockstep train` with a fresh --log_dir and returns its log rows."""
    log_dir = os.path.join(log_parent, run_name)
    os.makedirs(log_dir)
    run_streaming([binary, "train"] + arguments + ["--log_dir", log_dir], "lockstep")
    _, rows = read_lockstep_log(log_dir, model)
    return rows


class LogFolder:
    """The parent folder of the runs' log folders: the user's (kept) or a temporary one (removed)."""

    def __init__(self, requested):
        self.requested = requested

    def __enter__(self):
        if self.requested:
            os.makedirs(self.requested, exist_ok=True)
            self.path = tempfile.mkdtemp(prefix="run_", dir=self.requested)
        else:
            self.path = tempfile.mkdtemp(prefix="lockstep_bench_")
        return self.path

    def __exit__(self, *exc):
        if not self.requested:
            shutil.rmtree(self.path, ignore_errors=True)
        return False


def print_table(title, rows):
    """rows: (label, lockstep text, pytorch text)."""
    width = max(len(label) for label, _, _ in rows)
    print()
    print(title)
    print(f"  {'':<{width}}  {'lockstep':>12}  {'pytorch':>12}")
    for label, ours, theirs in rows:
        print(f"  {label:<{width}}  {ours:>12}  {theirs:>12}")


def repeat_warnings(*outputs):
    for output in outputs:
        for line in output.splitlines():
            if line.startswith("WARNING"):
                print(line)


def mean(values):
    return sum(values) / len(values)


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

    # Per round: (mean seconds per epoch, final test accuracy, images per epoch).
    ours, theirs, peer_outputs = [], [], []
    try:
        with LogFolder(args.log_dir) as log_parent:
            for round_index in range(args.rounds):
                print(f"\n=== round {round_index + 1}/{args.rounds} ===", flush=True)
                rows = run_lockstep(args.lockstep, lockstep_arguments, "lenet", log_parent,
                                    f"lenet_round{round_index + 1}")
                ours.append((mean([row["time_spent"] for row in rows]), rows[-1]["test_accuracy"],
                             rows[-1]["input_count"]))
                output = run_streaming(peer_command, "pytorch")
                peer_outputs.append(output)
                result = last_json_line(output, "lenet_peer.py")
                theirs.append((mean(result["seconds_per_epoch"]), result["test_accuracy"],
                               result["images_per_epoch"]))
    except BenchError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)

    for index, (a, b) in enumerate(zip(ours, theirs)):
        print(f"round {index + 1}: lockstep {a[0]:.2f} s/epoch, test acc {a[1]:.4f} | "
              f"pytorch {b[0]:.2f} s/epoch, test acc {b[1]:.4f}")
    best_ours, best_theirs = min(ours), min(theirs)
    ratio = best_ours[0] / best_theirs[0]

    def accuracy_text(value):
        return "n/a" if value < 0 else f"{value:.4f}"

    print_table(f"LeNet on Fashion-MNIST: batch {args.batch_size}, lr {args.lr}, {args.epochs} epoch(s), "
                f"{args.threads} threads, best of {args.rounds} round(s)",
                [("test accuracy (final epoch)", accuracy_text(best_ours[1]), accuracy_text(best_theirs[1])),
                 ("seconds/epoch (mean)", f"{best_ours[0]:.2f}", f"{best_theirs[0]:.2f}"),
                 ("images/epoch", f"{best_ours[2]:.0f}", f"{best_theirs[2]:.0f}"),
                 ("images/sec", f"{best_ours[2] / best_ours[0]:.0f}", f"{best_theirs[2] / best_theirs[0]:.0f}")])
    if best_ours[1] >= 0:
        print(f"test accuracy, lockstep - pytorch: {best_ours[1] - best_theirs[1]:+.4f}")
    verdict = "met" if ratio <= LENET_TIME_RATIO_TARGET else "NOT met"
    print(f"seconds/epoch, lockstep/pytorch: {ratio:.3f} (target <= {LENET_TIME_RATIO_TARGET}: {verdict})")
    if abs(best_ours[2] - best_theirs[2]) > 0.01 * best_theirs[2]:
        print("note: the two sides trained on different numbers of images per epoch; compare images/sec too")
    repeat_warnings(*peer_outputs)
    print(json.dumps({"benchmark": "lenet", "threads": args.threads, "rounds": args.rounds, "epochs": args.epochs,
                      "lockstep": {"test_accuracy": best_ours[1], "seconds_per_epoch": best_ours[0]},
                      "pytorch": {"test_accuracy": best_theirs[1], "seconds_per_epoch": best_theirs[0]},
                      "time_ratio": ratio, "time_ratio_target": LENET_TIME_RATIO_TARGET}))


if __name__ == "__main__":
    main()
