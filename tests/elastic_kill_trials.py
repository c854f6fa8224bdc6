#!/usr/bin/python3
"""Kill trials of `lockstep launch`: LeNet on Fashion-MNIST, 3 shards on 127.0.0.1 under one agent with
--max_restarts 3, and in each trial one shard killed (SIGKILL) or stopped (SIGSTOP) at a random moment: while
the shards meet, at the first step, mid-epoch, or while shard 0 writes a checkpoint. Every trial must finish by
itself with a final checkpoint bitwise equal to that of an uninterrupted run with the same global batch, and
leave no shard process behind. Prints each trial's time lost to the failure and a summary.

Not part of the test suite (it takes minutes): python3 tests/elastic_kill_trials.py [--trials 20]
"""
import argparse
import glob
import json
import os
import random
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

MOMENTS = ["rendezvous", "first step", "mid-epoch", "checkpoint"]


def training(directory, args):
    return ["train", "--use_cpu", "--threads", "1", "--distributed_interfaces", "lo", "--model", "lenet",
            "--train_data", "fashion-mnist", "--batch_size", "8",
            "--epoch_size", str(args.steps_per_epoch * 8 * 3), "--num_epochs", str(args.epochs),
            "--base_learning_rate", "0.1", "--momentum", "0.9", "--save_model_name", "m",
            "--checkpoint_every_iters", str(args.checkpoint_every_iters),
            "--log_dir", directory, "--timeout", "3", "--first_iter_timeout", "10"]


class Agent:
    """`lockstep launch` with its output lines timestamped as they arrive."""

    def __init__(self, args, directory):
        command = [args.lockstep, "launch", "--nproc_per_node", "3", "--max_restarts", "3",
                   "--monitor_interval", "0.2", "--rdzv", "file://" + directory, "--"] + training(directory, args)
        self.start = time.monotonic()
        self.lines = []  # (seconds since start, line)
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.append((time.monotonic() - self.start, line.rstrip("\n")))

    def first(self, pattern, after=0.0):
        for when, line in list(self.lines):
            if when >= after and re.search(pattern, line):
                return when, line
        return None

    def wait_for(self, pattern, limit):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline and self.process.poll() is None:
            found = self.first(pattern)
            if found:
                return found
            time.sleep(0.002)
        return self.first(pattern)

    def now(self):
        return time.monotonic() - self.start

    def finish(self, limit):
        try:
            code = self.process.wait(limit)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = None
        self.reader.join(5)
        return code, self.now()


def read_safetensors(path):
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        data = f.read()
    metadata = header.pop("__metadata__", {})
    tensors = {name: (entry["dtype"], entry["shape"], data[entry["data_offsets"][0]:entry["data_offsets"][1]])
               for name, entry in header.items()}
    return metadata, tensors


def same_checkpoint(actual, expected):
    (actual_metadata, actual_tensors), (expected_metadata, expected_tensors) = map(read_safetensors,
                                                                                   (actual, expected))
    keys = ["model", "seed", "epochs_done", "iteration", "reader_position", "images_trained"]
    return actual_tensors == expected_tensors and all(actual_metadata.get(k) == expected_metadata.get(k)
                                                      for k in keys)


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def strike(agent, directory, moment, rng, epoch_seconds):
    """Waits for the moment, then returns (victim shard, pid, seconds since start) of the signal to send."""
    started = agent.wait_for(r"round 0: run id", 60)
    if not started:
        return None
    pids = {int(s): int(p) for s, p in re.findall(r"shard (\d+) pid (\d+)", started[1])}
    victim = rng.randrange(3)
    if moment == "rendezvous":
        time.sleep(rng.uniform(0, 0.3))
    elif moment == "first step":
        for shard in range(3):
            agent.wait_for(rf"\[shard {shard}\] shard {shard} of 3: joined", 60)
        time.sleep(rng.uniform(0, 0.05))
    elif moment == "mid-epoch":
        epoch = rng.randrange(1, 3)  # after the checkpoint of epoch 1 or 2
        agent.wait_for(rf"saved checkpoint .*m_{epoch}\.safetensors", 120)
        time.sleep(rng.uniform(0.1, 0.8) * epoch_seconds)
    else:  # while shard 0 writes a checkpoint, or right after that of epoch 1 or 2 when the write is too quick
        victim = 0
        epoch = rng.randrange(1, 3)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and agent.process.poll() is None:
            if glob.glob(os.path.join(directory, "m_*.safetensors.tmp.*")) or \
                    os.path.exists(os.path.join(directory, f"m_{epoch}.safetensors")):
                break
            time.sleep(0.0005)
    return victim, pids[victim], agent.now(), list(pids.values())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--lockstep", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                           "..", "build", "lockstep"))
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps_per_epoch", type=int, default=100)
    parser.add_argument("--checkpoint_every_iters", type=int, default=25,
                        help="mid-epoch checkpoints, so a restart loses less (default 25; 0: per epoch only)")
    parser.add_argument("--seed", type=int, default=None, help="of the trials' choices (default: random)")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    root = tempfile.mkdtemp(prefix="lockstep_kill_trials_")
    try:
        reference_dir = os.path.join(root, "reference")
        os.makedirs(reference_dir)
        # Twice, keeping the faster: the first run also warms the page cache.
        reference_seconds = float("inf")
        for _ in range(2):
            shutil.rmtree(reference_dir)
            os.makedirs(reference_dir)
            reference = Agent(args, reference_dir)
            code, seconds = reference.finish(600)
            if code != 0:
                print("the uninterrupted run failed:\n" + "\n".join(line for _, line in reference.lines))
                return 1
            reference_seconds = min(reference_seconds, seconds)
        epochs = [float(m) for _, line in reference.lines for m in re.findall(r"\] epoch \d+/\d+: ([0-9.]+) s", line)]
        epoch_seconds = statistics.mean(epochs) if epochs else 1.0
        final = f"m_{args.epochs}.safetensors"
        print(f"seed {seed}; uninterrupted run: {reference_seconds:.1f} s, {args.epochs} epochs of "
              f"{args.steps_per_epoch} steps (~{epoch_seconds:.2f} s each)")
        results = []
        for trial in range(1, args.trials + 1):
            directory = os.path.join(root, f"trial{trial}")
            os.makedirs(directory)
            moment = rng.choice(MOMENTS)
            sent = rng.choice([signal.SIGKILL, signal.SIGSTOP])
            agent = Agent(args, directory)
            struck = strike(agent, directory, moment, rng, epoch_seconds)
            if struck:
                victim, pid, kill_time, pids = struck
                try:
                    os.kill(pid, sent)
                except ProcessLookupError:
                    pass
            code, seconds = agent.finish(600)
            problems = []
            restarts = len([1 for _, line in agent.lines if re.search(r"^lockstep launch: round [1-9]\d*: run id",
                                                                      line)])
            if not struck:
                problems.append("the shards never started")
            if code != 0:
                problems.append(f"agent exit code {code}")
            elif not same_checkpoint(os.path.join(directory, final), os.path.join(reference_dir, final)):
                problems.append("final checkpoint differs from the uninterrupted run's")
            if struck and any(alive(p) for p in pids):
                problems.append("a shard of round 0 outlived it")
            noticed = agent.first(r"stopping shards")
            detection = noticed[0] - kill_time if struck and noticed else float("nan")
            restarted = agent.first(r"^lockstep launch: round 1: run id")
            restart = restarted[0] - kill_time if struck and restarted else float("nan")
            lost = seconds - reference_seconds
            results.append((moment, sent, restarts, lost, detection, not problems))
            name = signal.Signals(sent).name
            where = f"shard {victim} " if struck else ""
            print(f"trial {trial:2d}: {name:7s} {where}at {moment:10s} ({kill_time if struck else 0:5.2f} s): "
                  f"{'ok' if not problems else 'FAILED: ' + '; '.join(problems)}, {restarts} restart(s), "
                  f"{seconds:.1f} s, time lost {lost:+.1f} s (noticed after {detection:.2f} s, restarted after "
                  f"{restart:.2f} s)",
                  flush=True)
            if problems and not os.environ.get("KEEP"):
                print("\n".join(line for _, line in agent.lines if not line.startswith("[shard")))
            shutil.rmtree(directory, ignore_errors=True)
        passed = sum(1 for r in results if r[5])
        print(f"\n{passed}/{len(results)} trials finished by themselves with the uninterrupted run's checkpoint")
        for name in ("SIGKILL", "SIGSTOP"):
            lost = [r[3] for r in results if signal.Signals(r[1]).name == name and r[2] > 0]
            if lost:
                print(f"{name}: time lost per failure: mean {statistics.mean(lost):.1f} s, median "
                      f"{statistics.median(lost):.1f} s, max {max(lost):.1f} s over {len(lost)} restarted trials")
        for moment in MOMENTS:
            lost = [r[3] for r in results if r[0] == moment and r[2] > 0]
            if lost:
                print(f"  at {moment}: mean {statistics.mean(lost):.1f} s over {len(lost)}")
        return 0 if passed == len(results) else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
