#!/usr/bin/env python3
"""The documentation as a test: every ```sh command and ```python snippet of README.md and of the pages of docs/,
run in order in a scratch folder as a newcomer would run them, and the files and lines the text promises checked.
The pages run in the order docs/README.md (the index) links them, then any page it does not link, by name, so
that a page may use what an earlier one made.

The scratch folder is made in the build folder, not in /tmp (which other programs on a shared machine may clean
while the commands run), and removed at the end; it links `build` and `examples` to the build and the
repository, so the commands run as written. LOCKSTEP_MAX_STEPS (2) caps every epoch, the one knob that shortens
them. Commands that need what a test machine has not (GPUs, several machines, ImageNet, your own images) or that
the suite itself stands for (setup, build, the test scripts) are skipped with their reason. Prints each
command's outcome and the counts run / skipped / failed; exits 1 when one failed.

    /usr/bin/python3 tests/readme_commands.py --build build [--keep]
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_STEPS = "2"
COMMAND_TIMEOUT = 600  # seconds; a hung command fails instead of holding the suite

# (pattern in the command, why it is skipped); every matching reason is reported.
SKIPS = [
    (r"^scripts/(setup|build|test|demo)\.sh", "the harness runs inside the suite the build made"),
    (r"^scripts/(sanitize|fuzz)\.sh", "builds a tree of its own under the sanitizers or libFuzzer; .ci/run runs it"),
    (r"^cmake (--install|-S examples/consumer|--build build --target package)",
     "tests Install.prefix and Install.deb install, build against and package the tree"),
    (r"redis\.example|/nfs/|--nnodes [2-9]|head:6379|ppr:1:node", "needs several machines"),
    (r"ilsvrc12_", "needs the ImageNet databases"),
    (r"/usr/bin/time -v build/resnet50_trainer", "measures the ImageNet command's memory: 6.3 GB, more than a test "
     "should take"),
    (r"--image_folder photos", "needs a folder of your own images"),
    (r"python3 resnet50_trainer\.py", "needs Caffe2's own resnet50_trainer.py, which lockstep does not ship "
     "(tests/python/test_caffe2.py covers its calls)"),
]
GPU_SKIP = "needs a CUDA GPU"
BFLOAT16_SKIP = "needs a CPU with AVX512_BF16 or AMX"


def expect_files(*patterns):
    def check(scratch, output):
        for pattern in patterns:
            if not glob.glob(os.path.join(scratch, pattern)):
                return f"no file {pattern}"
        return None
    return check


def expect_lines(*regexes):
    def check(scratch, output):
        for regex in regexes:
            if not re.search(regex, output, re.MULTILINE):
                return f"no line matching {regex!r} in its output"
        return None
    return check


def expect_file_lines(pattern, count, first=None):
    def check(scratch, output):
        paths = sorted(glob.glob(os.path.join(scratch, pattern)))
        if not paths:
            return f"no file {pattern}"
        with open(paths[0]) as f:
            lines = f.read().splitlines()
        if len(lines) != count:
            return f"{os.path.relpath(paths[0], scratch)} has {len(lines)} lines, not {count}"
        if first is not None and lines[0] != first:
            return f"{os.path.relpath(paths[0], scratch)} starts {lines[0]!r}, not {first!r}"
        return None
    return check


ITER_LOG_HEADER = ("unix_time,elapsed_seconds,epoch,iteration,iterations,inputs_per_sec,loss,accuracy,"
                   "learning_rate,epoch_eta_seconds,run_eta_seconds")

# What the text promises after a command, found by a pattern in the command: checks that return None when kept.
PROMISES = [
    # The README's tour
    (r"lockstep train --model lenet .*--num_gpus 2 .*--num_epochs 2 --log_dir tour", [
        expect_lines(r"^epoch 2/2: .*test accuracy 0\.\d+$"),
        expect_files("tour/lenet_gpu2_b256_L10_lr0.20_v2_*.log")]),
    (r"lenet_data_parallel\.py --num_epochs 2", [expect_lines(r"^epoch 2: 2 steps, ")]),
    (r"lockstep launch --nproc_per_node 2 --rdzv file://tour", [expect_files("tour/tour_2.safetensors"),
                                                               expect_lines(r"^\[shard 1\] epoch 2/2: ")]),
    # The guide
    (r"lockstep train --model lenet .*--num_epochs 10 .*--file_store_path checkpoints --log_dir logs", [
        expect_lines(r"^LOCKSTEP_MAX_STEPS=2: 2 steps per epoch instead of 234$",
                     r"^epoch 10/10: .*test accuracy 0\.\d+$"),
        expect_files(*[f"checkpoints/lenet_{epoch}.safetensors" for epoch in range(1, 11)]),
        expect_file_lines("logs/lenet_gpu1_b256_L10_lr0.20_v2_*.log", 12)]),
    (r"resnet50_trainer --train_data null", [expect_lines(r"^epoch 1/1: ")]),
    (r"lockstep eval .*--predictions predictions\.csv", [
        expect_lines(r"^10000 records: loss [\d.]+, top-1 accuracy 0\.\d+ "),
        expect_file_lines("predictions.csv", 10001, "key,label,predicted_class,score")]),
    (r"--iter_log momentum\.csv", [expect_file_lines("momentum.csv", 3, ITER_LOG_HEADER)]),
    (r"--iter_log nesterov\.csv", [expect_file_lines("nesterov.csv", 3, ITER_LOG_HEADER)]),
    (r"plot logs/lenet_\*\.log -o curves\.png", [expect_files("curves.png")]),
    (r"plot momentum\.csv nesterov\.csv -o iterations\.png", [expect_files("iterations.png")]),
    (r"lockstep export .*--output lenet\.onnx", [expect_files("lenet.onnx"), expect_lines(r"^lenet\.onnx: \d+ ONNX nodes ")]),
    (r"--tensorboard_dir tb$", [expect_files("tb/events.out.tfevents.*"),
                                expect_lines(r"^TensorBoard events: tb/events\.out\.tfevents\.")]),
    (r"make-db .*--output fashion_train_lmdb", [
        expect_lines(r"^wrote 60000 records of 28x28 images with 1 channel to lmdb fashion_train_lmdb$"),
        expect_files("fashion_train_lmdb/data.mdb", "fashion_train_lmdb/lockstep_image_geometry.json")]),
    (r"--train_data fashion_train_lmdb .*--scale 28", [expect_lines(r"^epoch 3/3: .*test accuracy 0\.\d+$")]),
    (r"lenet_data_parallel\.py( #.*)?$", [expect_lines(r"^epoch 10: 2 steps, ")]),  # the 10 epochs of its default
    (r"mpirun -np 2 .*resnet50_trainer\.py", [expect_lines(r"^shard 1 of 2: joined ", r"^shard 1: epoch 1/1: ")]),
    (r"--model_parallel 2", [expect_lines(r"^epoch 1/1: ")]),
    (r"lockstep launch --nproc_per_node 3", [expect_files("runs/lenet_10.safetensors"),
                                             expect_lines(r"^\[shard 1\] epoch 10/10: ")]),  # one prefix
]


def documentation_pages(docs):
    """The Markdown files under `docs`: the index (README.md) first, then the pages in the order it links them,
    then the pages it does not link, sorted."""
    pages = sorted(glob.glob(os.path.join(docs, "**", "*.md"), recursive=True))
    index = os.path.join(docs, "README.md")
    ordered = []
    if os.path.exists(index):
        ordered.append(index)
        with open(index) as f:
            for link in re.findall(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", f.read()):
                page = os.path.normpath(os.path.join(docs, link))
                if page in pages and page not in ordered:
                    ordered.append(page)
    return ordered + [page for page in pages if page not in ordered]


def blocks(path):
    """(language, first line number, text) of each fenced sh or python block of a Markdown file."""
    found, language, start, lines = [], None, 0, []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            fence = re.match(r"^```(\w*)\s*$", line)
            if fence and language is None:
                language, start, lines = fence.group(1) or "text", number + 1, []
            elif fence:
                if language in ("sh", "python"):
                    found.append((language, start, "".join(lines)))
                language = None
            elif language is not None:
                lines.append(line)
    return found


def commands(text):
    """The commands of a sh block: continuation lines joined, comments and blank lines left out."""
    result, current = [], ""
    for line in text.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            current += line[:-1]
            continue
        result.append(re.sub(r"\s+", " ", (current + line).strip()))
        current = ""
    return result


def skip_reason(command, have_gpu, have_cpu_bfloat16):
    reasons = [reason for pattern, reason in SKIPS if re.search(pattern, command)]
    trains = re.search(r"\b(lockstep (train|eval)|resnet50_trainer(\.py)?)\b", command)
    if trains and "--use_cpu" not in command and not have_gpu:
        reasons.append(GPU_SKIP)
    if trains and "--use_cpu" in command and "--dtype bfloat16" in command and not have_cpu_bfloat16:
        reasons.append(BFLOAT16_SKIP)
    return "; ".join(reasons)


def environment():
    env = dict(os.environ, LOCKSTEP_MAX_STEPS=MAX_STEPS)
    # mpirun refuses root unless told, and counts slots by cores.
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    return env


def run(argv, scratch, env):
    start = time.monotonic()
    try:
        done = subprocess.run(argv, cwd=scratch, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=COMMAND_TIMEOUT)
        code, output = done.returncode, done.stdout
    except subprocess.TimeoutExpired as e:
        code, output = None, (e.stdout or "") + f"\n(stopped after {COMMAND_TIMEOUT} s)"
    return code, output, time.monotonic() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", required=True, help="the build folder (its lockstep, resnet50_trainer, python/)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder and print its path")
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    have_gpu = shutil.which("nvidia-smi") is not None and subprocess.run(
        ["nvidia-smi", "-L"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    version = subprocess.run([os.path.join(build, "lockstep"), "--version"], stdout=subprocess.PIPE, text=True)
    have_cpu_bfloat16 = re.search(r"CPU kernels for avx512_core_(bf16|fp16|amx)", version.stdout) is not None
    documents = [os.path.join(REPO, "README.md")] + documentation_pages(os.path.join(REPO, "docs"))
    scratch = tempfile.mkdtemp(prefix="readme_commands_", dir=build)
    try:
        os.symlink(build, os.path.join(scratch, "build"))
        os.symlink(os.path.join(REPO, "examples"), os.path.join(scratch, "examples"))
        counts = check_documents(documents, scratch, build, have_gpu, have_cpu_bfloat16)
    finally:
        if args.keep:
            print(f"scratch folder: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return 1 if counts["failed"] else 0


def check_documents(documents, scratch, build, have_gpu, have_cpu_bfloat16):
    """Runs the commands and snippets of `documents` in `scratch` and checks their promises; prints each outcome
    and returns the counts."""
    env = environment()
    python_env = dict(env, PYTHONPATH=os.path.join(build, "python"))
    kept = set()  # the PROMISES whose command ran
    counts = {"run": 0, "skipped": 0, "failed": 0}
    reasons = {}
    assignments = []  # VAR=value lines run so far, so later commands see the variables as in one shell
    started = time.monotonic()
    for document in documents:
        name = os.path.relpath(document, REPO)
        for language, line, text in blocks(document):
            if language == "python":
                items = [("python", text)]
            else:
                items = [("sh", command) for command in commands(text)]
            for kind, item in items:
                where = f"{name}:{line}"
                shown = item if kind == "sh" else f"python snippet ({len(text.splitlines())} lines)"
                reason = skip_reason(item, have_gpu, have_cpu_bfloat16) if kind == "sh" else ""
                if reason:
                    counts["skipped"] += 1
                    reasons[reason] = reasons.get(reason, 0) + 1
                    print(f"skipped  {where}: {shown}\n         ({reason})", flush=True)
                    continue
                if kind == "sh":
                    argv, command_env = ["bash", "-e", "-o", "pipefail", "-c", "\n".join(assignments + [item])], env
                else:
                    argv, command_env = ["/usr/bin/python3", "-c", item], python_env
                code, output, seconds = run(argv, scratch, command_env)
                failure = None if code == 0 else f"exit code {code}"
                for index, (pattern, checks) in enumerate(PROMISES):
                    if kind == "sh" and re.search(pattern, item):
                        kept.add(index)
                        failure = failure or next((f for f in (check(scratch, output) for check in checks) if f),
                                                  None)
                if kind == "sh" and re.fullmatch(r"[A-Z_]+=\S+", item):
                    assignments.append(item)
                if failure:
                    counts["failed"] += 1
                    tail = "\n".join("         | " + l for l in output.splitlines()[-25:])
                    print(f"FAILED   {where}: {shown} ({seconds:.0f} s): {failure}\n{tail}", flush=True)
                else:
                    counts["run"] += 1
                    print(f"ran      {where}: {shown} ({seconds:.0f} s)", flush=True)
    for index, (pattern, _) in enumerate(PROMISES):
        if index not in kept:  # the text changed under the table: say so rather than check nothing
            counts["failed"] += 1
            print(f"FAILED   no command ran that matches the promise {pattern!r}", flush=True)
    print(f"\ndocumented commands: {counts['run']} run, {counts['skipped']} skipped, {counts['failed']} failed "
          f"in {time.monotonic() - started:.0f} s (LOCKSTEP_MAX_STEPS={MAX_STEPS})")
    for reason, count in sorted(reasons.items()):
        print(f"  skipped {count}: {reason}")
    return counts


if __name__ == "__main__":
    sys.exit(main())
