#!/usr/bin/python3
"""Checkpoint mutations: a LeNet checkpoint with one byte changed, at random places in its header and in its
tensor data, loaded as a user would load it: `lockstep eval --load_model_path` and a resumed
`lockstep train --load_model_path`. Every mutant must be refused with one line (exit code 2); prints the count
per region and every mutant that was accepted.

Takes about a second per mutant and command: python3 bench/checkpoint_mutations.py [--mutants 160]
"""
import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lockstep", default=os.path.join(REPOSITORY, "build", "lockstep"),
                        help="the lockstep binary (default: build/lockstep)")
    parser.add_argument("--mutants", type=int, default=160, help="mutants, half in the header, half in the data")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.mutants < 2:
        parser.error("--mutants must be at least 2")
    if not os.access(args.lockstep, os.X_OK):
        parser.error(f"{args.lockstep} is not an executable lockstep binary: build it first (scripts/build.sh)")
    return args


def run(command, cwd):
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)


def train_checkpoint(lockstep, directory):
    """One short LeNet epoch on Fashion-MNIST: lenet_1.safetensors, with momentum buffers."""
    result = run([lockstep, "train", "--model", "lenet", "--train_data", "fashion-mnist", "--use_cpu",
                  "--batch_size", "64", "--epoch_size", "640", "--num_epochs", "1", "--threads", "1",
                  "--save_model_name", "lenet", "--file_store_path", directory, "--log_dir", directory], directory)
    if result.returncode != 0:
        sys.exit(f"checkpoint_mutations: training the checkpoint failed:\n{result.stdout}{result.stderr}")
    return os.path.join(directory, "lenet_1.safetensors")


def loaders(lockstep, mutant, directory):
    """The commands that load a checkpoint, by name."""
    common = ["--model", "lenet", "--use_cpu", "--threads", "1", "--batch_size", "64", "--load_model_path", mutant]
    return {
        "eval": [lockstep, "eval", "--test_data", "fashion-mnist"] + common,
        "resume": [lockstep, "train", "--train_data", "fashion-mnist", "--epoch_size", "64", "--num_epochs", "2",
                   "--log_dir", directory] + common,
    }


def main():
    args = parse_args()
    rng = random.Random(args.seed)
    directory = tempfile.mkdtemp(prefix="checkpoint_mutations_")
    try:
        good_path = train_checkpoint(args.lockstep, directory)
        good = open(good_path, "rb").read()
        (header_size,) = struct.unpack("<Q", good[:8])
        data_start = 8 + header_size
        tensors = len(json.loads(good[8:data_start])) - 1
        print(f"checkpoint: {len(good)} bytes, {data_start} of them the length and header, {tensors} tensors")
        mutant = os.path.join(directory, "mutant.safetensors")
        counts = {}  # (region, command) -> (refused, tried)
        accepted = []
        for number in range(args.mutants):
            region = "header" if number % 2 == 0 else "data"
            offset = rng.randrange(0, data_start) if region == "header" else rng.randrange(data_start, len(good))
            xor = rng.randrange(1, 256)
            bad = bytearray(good)
            bad[offset] ^= xor
            with open(mutant, "wb") as f:
                f.write(bad)
            for name, command in loaders(args.lockstep, mutant, directory).items():
                result = run(command, directory)
                lines = result.stderr.strip().splitlines()
                refused = result.returncode == 2 and len(lines) == 1 and lines[0].startswith("lockstep: error: ")
                done, tried = counts.get((region, name), (0, 0))
                counts[(region, name)] = (done + refused, tried + 1)
                if not refused:
                    accepted.append(f"{name}: byte {offset} ^ {xor:#04x} ({region}): exit {result.returncode}, "
                                    f"stderr {result.stderr.strip()!r}")
        print(f"{'region':8} {'command':8} {'refused':>8} {'mutants':>8}")
        for (region, name), (refused, tried) in sorted(counts.items()):
            print(f"{region:8} {name:8} {refused:>8} {tried:>8}")
        for line in accepted:
            print("accepted:", line)
        print(f"{sum(t for _, t in counts.values()) - len(accepted)} of {sum(t for _, t in counts.values())} "
              f"loads of {args.mutants} mutants refused")
        return 1 if accepted else 0
    finally:
        shutil.rmtree(directory)


if __name__ == "__main__":
    sys.exit(main())
