#!/usr/bin/python3
"""What the compare scripts share: finding the lockstep binary, streaming a run, reading lockstep's CSV log,
capping both sides to one CPU ISA, and running rounds that alternate lockstep and the PyTorch peer(s)."""

import csv
import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

from torch_setup import describe_line  # imports no torch

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
DEFAULT_LOCKSTEP = os.path.join(REPO_ROOT, "build", "lockstep")
# The current PyTorch from PyPI (bench/setup_torch.sh); Debian's python3-torch 1.13 is the old peer.
VENV_PEER_PYTHON = os.path.join(BENCH_DIR, ".venv", "bin", "python")
DEBIAN_PEER_PYTHON = "/usr/bin/python3"
DEFAULT_PEER_PYTHON = VENV_PEER_PYTHON if os.path.exists(VENV_PEER_PYTHON) else DEBIAN_PEER_PYTHON

# oneDNN picks its kernels by CPU. "avx2" caps both sides to AVX2 on an AVX-512 machine: oneDNN (lockstep's
# Debian libdnnl and PyTorch's bundled copy), MKL (PyPI's torch), ATen's own vectorised kernels (PyTorch) and
# OpenBLAS (Debian's torch). "native" removes these variables, so that each library picks the best it can.
ISA_ENVIRONMENTS = {
    "native": {},
    "avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ATEN_CPU_CAPABILITY": "avx2",
             "OPENBLAS_CORETYPE": "Haswell"},
}
ISA_VARIABLES = sorted({name for environment in ISA_ENVIRONMENTS.values() for name in environment})

LOG_HEADER = ("time_spent,cumulative_time_spent,input_count,cumulative_input_count,cumulative_batch_count,"
              "inputs_per_sec,accuracy,epoch,learning_rate,loss,test_accuracy").split(",")

class BenchError(Exception):
    """A run failed or produced output we cannot read; reported as one line."""


def add_common_arguments(parser, default_rounds):
    parser.add_argument("--lockstep", default=DEFAULT_LOCKSTEP, help="lockstep binary (default build/lockstep)")
    parser.add_argument("--python", default=DEFAULT_PEER_PYTHON,
                        help="interpreter with torch for the PyTorch peer (default %(default)s: bench/.venv from "
                             "bench/setup_torch.sh when present, else Debian's python3-torch)")
    parser.add_argument("--threads", type=int, default=2, help="threads for each side (default 2)")
    parser.add_argument("--rounds", type=int, default=default_rounds,
                        help="alternating lockstep/PyTorch rounds (default %(default)s)")
    parser.add_argument("--isa", choices=sorted(ISA_ENVIRONMENTS), default="native",
                        help="CPU ISA for both sides: native, or avx2 (caps oneDNN, MKL, ATen and OpenBLAS to AVX2 "
                             "through environment variables)")
    parser.add_argument("--log_dir", default=None,
                        help="keep lockstep's logs in per-run folders under this folder (default: a temporary "
                             "folder, removed afterwards)")


def require_lockstep(path):
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        print(f"error: lockstep binary not found at {path}; build it with scripts/build.sh "
              f"(or pass --lockstep PATH)", file=sys.stderr)
        sys.exit(2)


def apply_isa(isa):
    """Sets (or, for native, removes) the ISA variables in this process, which both sides inherit."""
    for name in ISA_VARIABLES:
        os.environ.pop(name, None)
    os.environ.update(ISA_ENVIRONMENTS[isa])
    settings = " ".join(f"{name}={value}" for name, value in ISA_ENVIRONMENTS[isa].items())
    print(f"ISA: {isa}" + (f" ({settings})" if settings else " (each library picks its kernels by CPU)"), flush=True)


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


def run_lockstep(binary, arguments, model, log_parent, run_name, tag="lockstep"):
    """Runs `lockstep train` with a fresh --log_dir and returns its log rows."""
    log_dir = os.path.join(log_parent, run_name)
    os.makedirs(log_dir)
    run_streaming([binary, "train"] + arguments + ["--log_dir", log_dir], tag)
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


def print_table(title, rows, columns=("lockstep", "pytorch")):
    """rows: (label, one text per column)."""
    width = max(len(row[0]) for row in rows)
    column_width = max(12, *(len(column) for column in columns))
    print()
    print(title)
    print(f"  {'':<{width}}" + "".join(f"  {column:>{column_width}}" for column in columns))
    for label, *texts in rows:
        print(f"  {label:<{width}}" + "".join(f"  {text:>{column_width}}" for text in texts))


def repeat_warnings(*outputs):
    for output in outputs:
        for line in output.splitlines():
            if line.startswith("WARNING"):
                print(line)


def mean(values):
    return sum(values) / len(values)


def alternate_rounds(args, lockstep_runs, model, peers, peer_script):
    """Runs `args.rounds` rounds of each lockstep configuration of lockstep_runs, a list of (name, `lockstep
    train` arguments), and each PyTorch configuration of peers, a list of (name, command); the order of all
    configurations rotates from round to round, so that none always runs first. Applies `args.isa` first.
    Returns {name: lockstep's log rows per round}, {name: the peer's JSON result per round}, and the peer
    outputs (for their warnings). A failed run exits with one line."""
    apply_isa(args.isa)
    lockstep_rows = {name: [] for name, _ in lockstep_runs}
    peer_results, peer_outputs = {name: [] for name, _ in peers}, []
    runs = lockstep_runs + peers
    try:
        with LogFolder(args.log_dir) as log_parent:
            for round_index in range(args.rounds):
                print(f"\n=== round {round_index + 1}/{args.rounds} ===", flush=True)
                shift = round_index % len(runs)
                for name, arguments in runs[shift:] + runs[:shift]:
                    if name in lockstep_rows:
                        run_name = f"{model}_{name.replace(' ', '_')}_round{round_index + 1}"
                        lockstep_rows[name].append(run_lockstep(args.lockstep, arguments, model, log_parent,
                                                                run_name, name))
                    else:
                        output = run_streaming(arguments, name)
                        peer_outputs.append(output)
                        peer_results[name].append(last_json_line(output, peer_script))
    except BenchError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
    return lockstep_rows, peer_results, peer_outputs


def peer_description(result):
    """One line naming the peer's torch build, from its JSON result."""
    return describe_line(result["torch"])

