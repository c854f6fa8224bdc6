#!/usr/bin/python3
"""Chaos matrix of `lockstep launch`: LeNet on Fashion-MNIST under faults over the job's whole life.

Each trial starts a short job (3 shards on 127.0.0.1 under one agent, or 2 agents in network namespaces),
strikes once at a random moment of the fault's window, and judges the job by its exit status and its final
checkpoint, compared bitwise (every tensor, and the trainer state) with an uninterrupted run of the same layout
(with a file store: where the shards meet does not enter the arithmetic):
  recovered        finished by itself with the uninterrupted run's parameters
  loud stop        stopped non-zero without finishing; the reason is its last line (which must be the error)
  hang             still running when the trial's wall-clock limit passed (then killed)
  reported failed  the final checkpoint was written, yet the job exited non-zero
  wrong result     finished, but the parameters (or the trainer state) differ
  missed           finished bit for bit before the fault's moment came: nothing was tested
Faults: SIGKILL or SIGSTOP of a shard and SIGKILL of the agent (restarted with the same --job_id, as a supervisor
would) at rendezvous, the first step, mid-epoch, during a background checkpoint write and after the final
checkpoint; redis-server killed and restarted empty (--rdzv redis://); the disk filling up (a small tmpfs);
the newest checkpoint corrupted before a restart; one machine's link cut (network namespaces). With --busy every
fault also runs beside two busy loops. Every fault expects recovery except the full disk, which expects a loud
stop naming the disk and, once the space is freed, a rerun that finishes bit for bit. Exits 1 when a trial was
not what its fault expects (hangs, finished jobs reported failed and wrong results included).

Needs root (network namespaces, tmpfs) and redis-server. Not part of the test suite (it takes minutes):
  bench/chaos_matrix.py --lockstep build/lockstep --busy --trials 64
"""
import argparse
import contextlib
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time

from chaos import checkpoints
from chaos.busy_cores import BusyCores
from chaos.faults import DISK_FULL, Trial, catalogue
from chaos.job import PROGRESS, Job, Layout, training_arguments
from chaos.namespaces import Namespaces
from chaos.redis_server import RedisServer
from chaos.small_disk import SmallDisk

OUTCOMES = ["recovered", "loud stop", "hang", "reported failed", "wrong result", "missed"]
BUSY_LOOPS = 2


class Calibration:
    """An uninterrupted run of one layout under one load: its final checkpoint, its wall time, and how long the
    shards took to meet (from their start to the last one joined) and then to finish their first step."""

    def __init__(self, job, watcher, final, wall):
        lines = job.snapshot()
        started = next(when for when, line in lines if "round 0: run id" in line)
        joined = max(when for when, line in lines if re.search(r"\[shard \d+\] joined ", line))
        first_step = next(when for when, line in lines if PROGRESS.search(line))
        self.final, self.wall = final, wall
        self.join_seconds, self.first_step_seconds = joined - started, first_step - joined
        self.background_writes = sum(1 for name in watcher.seen if "iter" in name)


def make_layout(name, namespaces=None):
    if name == "netns":
        return Layout("netns", agents=2, shards=1, interface="veth0", namespaces=namespaces.names)
    return Layout("loopback", agents=1, shards=3)


def run_reference(args, layout_name, busy, root):
    """The faster of two uninterrupted runs (the first also warms the page cache); both must end with the same
    parameters."""
    runs = []
    for attempt in range(2):
        directory = os.path.join(root, f"reference_{layout_name}_{'busy' if busy else 'idle'}_{attempt}")
        store = os.path.join(directory, "store")
        os.makedirs(store)
        with contextlib.ExitStack() as stack:
            if busy:
                stack.enter_context(BusyCores(BUSY_LOOPS))
            namespaces = None
            if layout_name == "netns":
                namespaces = stack.enter_context(Namespaces(f"lschaos{os.getpid()}r", 2))
            layout = make_layout(layout_name, namespaces)
            job = Job(args.lockstep, layout, "file://" + store, f"reference{os.getpid()}",
                      training_arguments(args, layout, directory) + ["--file_store_path", store])
            watcher = checkpoints.Watcher(store, job.now)
            stack.callback(watcher.stop)
            stack.callback(job.kill)
            job.start_all()
            codes = job.finish(time.monotonic() + 600)
            wall = job.now()
            final = os.path.join(store, f"m_{args.epochs}.safetensors")
            if codes != [0] * layout.agents or not os.path.exists(final):
                print(f"the uninterrupted run ({layout_name}) failed with {codes}:")
                print("\n".join(line for _, line in job.snapshot()))
                sys.exit(1)
            runs.append(Calibration(job, watcher, final, wall))
    if checkpoints.differences(runs[0].final, runs[1].final):
        sys.exit(f"error: two uninterrupted {layout_name} runs differ: "
                 f"{checkpoints.differences(runs[0].final, runs[1].final)}")
    return min(runs, key=lambda run: run.wall)


def last_line(job, slot):
    output = job.output(slot)
    return output[-1] if output else "(no output)"


def judge(trial, codes, calibration, limit):
    """(outcome, reason) of the trial's job."""
    job = trial.job
    if None in codes:
        return "hang", f"still running after the trial's limit of {limit:.0f} s"
    final = os.path.join(trial.checkpoint_dir, f"m_{trial.args.epochs}.safetensors")
    differences = checkpoints.differences(final, calibration.final)
    failing = [slot for slot, code in enumerate(codes) if code != 0]
    if not failing:
        if differences:
            return "wrong result", "; ".join(differences)
        return ("missed", "") if trial.fault_time is None else ("recovered", "")
    lines = [last_line(job, slot) for slot in failing]
    said = "; ".join(("" if "error" in line.lower() else "[last line is not an error] ") + line[:220]
                     for line in lines)
    if os.path.exists(final):
        if differences:
            return "wrong result", "; ".join(differences)
        return "reported failed", f"exit {codes}: {said}"
    return "loud stop", f"exit {codes}: {said}"


def as_expected(trial, outcome):
    if outcome in ("recovered", "missed"):
        return True
    if trial.fault.expect != "loud stop" or trial.first_stop is None:
        return False
    return outcome == "loud stop" and bool(re.search(DISK_FULL, trial.first_stop)) and \
        "error" in trial.first_stop.lower()


def resumed_note(trial):
    """Which checkpoint the first restart after a corruption took, and what was said of the corrupt file."""
    job, name = trial.jobs[0], os.path.basename(trial.corrupted)
    said = job.first(re.escape(name), after=trial.fault_time)
    resumed = job.first(r"resuming from |fresh start", after=trial.fault_time)
    took = re.search(r"resuming from (.+?); started", resumed[1]) if resumed else None
    note = f"the restart took {os.path.basename(took.group(1)) if took else 'no checkpoint'}"
    if took and os.path.basename(took.group(1)) == name:
        note += " (THE CORRUPT ONE)"
    return note + (f"; said: {said[1][:160]}" if said else "; nothing was said of the corrupt file")


def work_redone(trial, watcher):
    """Seconds of training between the checkpoint the first restart resumed from (its file's appearance) and the
    strike; from the end of round 0's first step when the restart started afresh. None without a restart."""
    if trial.fault_time is None:
        return None
    job = trial.jobs[0]
    restart = job.first(r"round \d+: run id \S+, \d+ shards, batch \d+ per shard, (fresh start|resuming from )",
                        after=trial.fault_time)
    if not restart:
        return None
    resumed = re.search(r"resuming from (.+?); started", restart[1])
    if resumed:
        saved = watcher.appeared(resumed.group(1))
    else:
        first_step = job.first(PROGRESS.pattern)
        saved = first_step[0] if first_step else trial.fault_time
    return None if saved is None else max(0.0, trial.fault_time - saved)


def open_environment(stack, fault, busy, directory, store, args, number):
    """Busy loops, redis-server, the small disk or the namespaces the trial needs (closed with `stack`); returns
    (the fault's environment, the layout, the --rdzv address)."""
    if busy:
        stack.enter_context(BusyCores(BUSY_LOOPS))
    if fault.store == "redis":
        redis = stack.enter_context(RedisServer(directory))
        return redis, make_layout(fault.layout), redis.address
    if fault.store == "disk":
        return stack.enter_context(SmallDisk(store, args.disk_mb)), make_layout(fault.layout), "file://" + store
    if fault.layout == "netns":
        namespaces = stack.enter_context(Namespaces(f"lschaos{os.getpid()}t{number}", 2))
        return namespaces, make_layout(fault.layout, namespaces), "file://" + store
    return None, make_layout(fault.layout), "file://" + store


def run_trial(number, fault, busy, rng, args, calibration, root):
    directory = os.path.join(root, f"trial{number}")
    store = os.path.join(directory, "store")
    os.makedirs(store)
    limit = args.trial_limit or 2 * calibration.wall + args.first_iter_timeout + 15
    with contextlib.ExitStack() as stack:
        environment, layout, rdzv = open_environment(stack, fault, busy, directory, store, args, number)
        trial = Trial(number, fault, busy, rng, args, calibration, store, time.monotonic() + limit)
        trial.environment = environment
        trial.job = Job(args.lockstep, layout, rdzv, f"chaos{args.seed}_{number}",
                        training_arguments(args, layout, directory) + ["--file_store_path", store])
        trial.jobs.append(trial.job)
        watcher = checkpoints.Watcher(store, trial.job.now)
        stack.callback(watcher.stop)
        stack.callback(lambda: [job.kill() for job in trial.jobs])
        trial.job.start_all()
        fault.inject(trial)
        codes = trial.job.finish(trial.deadline)
        result = judge_trial(trial, codes, limit, watcher)
        if args.keep:
            with open(os.path.join(directory, "agents.log"), "w") as f:
                for job in trial.jobs:
                    f.writelines(f"{when:8.3f} {line}\n" for when, line in job.snapshot())
    if args.keep:
        shutil.copytree(directory, os.path.join(args.keep, os.path.basename(directory)), dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("*.safetensors*"))
    shutil.rmtree(directory, ignore_errors=True)
    return result


def judge_trial(trial, codes, limit, watcher):
    """The trial's row: its outcome and reason, whether its fault expects that, its notes and figures."""
    seconds = trial.job.now()
    outcome, reason = judge(trial, codes, trial.calibration, limit)
    if trial.first_stop is not None:
        rerun = "the rerun with the space freed finished bit for bit" if outcome == "recovered" else \
            f"the rerun with the space freed: {outcome}: {reason}"
        outcome, reason = "loud stop", f"{trial.first_stop[:220]} ({rerun})"
        if not re.search(DISK_FULL, trial.first_stop):
            reason = "[the disk is not named] " + reason
    if trial.corrupted:
        trial.notes.append(resumed_note(trial))
    stray = [] if outcome == "hang" else [pid for job in trial.jobs for pid in job.stray_shards()]
    if stray:
        trial.notes.append(f"shard processes outlived their agent: {stray}")
    restarts = len({m.group(1) for _, line in trial.jobs[0].snapshot()
                    for m in [re.search(r"round ([1-9]\d*): run id", line)] if m})
    trial.notes += [f"EXPECTED: {missed}" for missed in trial.missed_expectations]
    ok = as_expected(trial, outcome) and not stray and not trial.missed_expectations
    tail = [] if ok else [f"    {'rerun ' if index else ''}agent {slot}: {line}"
                          for index, job in enumerate(trial.jobs) for slot in range(job.layout.agents)
                          for line in job.output(slot)[-trial.args.show_lines:]]
    lost = seconds - trial.calibration.wall if outcome == "recovered" and len(trial.jobs) == 1 else None
    def short(text):  # paths under the matrix's temporary folder, without it
        return text.replace(os.path.dirname(trial.checkpoint_dir.rstrip("/")) + "/", "")

    return dict(number=trial.number, fault=trial.fault.name, busy=trial.busy, outcome=outcome, reason=short(reason),
                ok=ok, notes=[short(note) for note in trial.notes], restarts=restarts, seconds=seconds,
                redone=work_redone(trial, watcher), lost=lost, tail=[short(line) for line in tail])


def select_faults(names):
    faults = catalogue()
    if not names:
        return faults
    chosen = []
    for name in names.split(","):
        matches = [f for f in faults if f.name == name or f.name.startswith(name + "@") or f.name.endswith("@" + name)]
        if not matches:
            sys.exit(f"error: --faults: no fault '{name}'; the faults are {', '.join(f.name for f in faults)}, "
                     f"or a kind (kill-shard, stop-shard, kill-agent) or a moment (e.g. final) for several")
        chosen += [f for f in matches if f not in chosen]
    return chosen


def mean(values):
    values = [v for v in values if v is not None]
    return f"{statistics.mean(values):.1f}" if values else "-"


def summarize(results, faults, loads):
    print(f"\n{'fault':24s} {'load':5s} {'trials':>6s} {'recovered':>9s} {'loud':>5s} {'hangs':>5s} "
          f"{'reported failed':>15s} {'wrong':>5s} {'missed':>6s} {'restarts':>8s} {'redone s':>8s} {'lost s':>7s}  "
          f"loud stops: why")
    for fault in faults:
        for busy in loads:
            rows = [r for r in results if r["fault"] == fault.name and r["busy"] == busy]
            if not rows:
                continue
            count = {o: sum(1 for r in rows if r["outcome"] == o) for o in OUTCOMES}
            why = sorted({re.sub(r"\d+", "N", r["reason"])[:100] for r in rows if r["outcome"] == "loud stop"})
            print(f"{fault.name:24s} {'busy' if busy else 'idle':5s} {len(rows):6d} {count['recovered']:9d} "
                  f"{count['loud stop']:5d} {count['hang']:5d} {count['reported failed']:15d} "
                  f"{count['wrong result']:5d} {count['missed']:6d} {mean(r['restarts'] for r in rows):>8s} "
                  f"{mean(r['redone'] for r in rows):>8s} {mean(r['lost'] for r in rows):>7s}  {' | '.join(why)}")
    count = {o: sum(1 for r in results if r["outcome"] == o) for o in OUTCOMES}
    print(f"{'all':24s} {'':5s} {len(results):6d} {count['recovered']:9d} {count['loud stop']:5d} "
          f"{count['hang']:5d} {count['reported failed']:15d} {count['wrong result']:5d} {count['missed']:6d}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=0,
                        help="trials in all, spread evenly over the faults (and loads); default one per fault and load")
    parser.add_argument("--faults", default="", help="comma-separated fault names, kinds or moments (default: all)")
    parser.add_argument("--busy", action="store_true", help="run every fault also beside two busy loops")
    parser.add_argument("--seed", type=int, default=None, help="of the trials' choices (default: random)")
    parser.add_argument("--lockstep", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                           "build", "lockstep"))
    parser.add_argument("--keep", default="", help="copy every trial's logs (checkpoints left out) to this folder")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps_per_epoch", type=int, default=100)
    parser.add_argument("--checkpoint_every_iters", type=int, default=25)
    parser.add_argument("--timeout", type=float, default=3, help="train --timeout (seconds)")
    parser.add_argument("--first_iter_timeout", type=float, default=10, help="train --first_iter_timeout")
    parser.add_argument("--disk_mb", type=int, default=16, help="size of the disk-full fault's tmpfs")
    parser.add_argument("--trial_limit", type=float, default=0,
                        help="seconds before a trial counts as a hang (default: twice the uninterrupted run, plus "
                             "--first_iter_timeout, plus 15)")
    parser.add_argument("--show_lines", type=int, default=4, help="agent lines shown of a trial that went wrong")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("error: needs root (network namespaces, tmpfs)")
    if not os.access(args.lockstep, os.X_OK):
        sys.exit(f"error: no lockstep binary at {args.lockstep}; build it or pass --lockstep PATH")
    args.lockstep = os.path.abspath(args.lockstep)
    args.seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(args.seed)
    faults = select_faults(args.faults)
    loads = [False, True] if args.busy else [False]
    cells = [(fault, busy) for fault in faults for busy in loads]
    plan = [cells[i % len(cells)] for i in range(args.trials or len(cells))]
    rng.shuffle(plan)
    begin = time.monotonic()
    version = os.popen(f"{args.lockstep} --version").read().splitlines()[0]
    print(f"{version}; seed {args.seed}; {len(plan)} trials of {len(faults)} faults"
          f"{' x 2 loads' if args.busy else ''}; {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}", flush=True)
    root = tempfile.mkdtemp(prefix="lockstep_chaos_")
    try:
        calibrations = {}
        for layout in sorted({fault.layout for fault, _ in plan}):
            for busy in sorted({b for f, b in plan if f.layout == layout}):
                c = calibrations[layout, busy] = run_reference(args, layout, busy, root)
                print(f"uninterrupted {layout} run ({'busy' if busy else 'idle'}): {c.wall:.1f} s, "
                      f"{args.epochs} epochs of {args.steps_per_epoch} steps (joined after {c.join_seconds:.2f} s, "
                      f"first step {c.first_step_seconds:.2f} s later, {c.background_writes} background "
                      f"checkpoints)", flush=True)
            finals = [c.final for (l, _), c in calibrations.items() if l == layout]
            if len(finals) > 1 and checkpoints.differences(finals[0], finals[1]):
                sys.exit(f"error: the uninterrupted {layout} runs idle and busy differ: "
                         f"{checkpoints.differences(finals[0], finals[1])}")
        results = []
        for number, (fault, busy) in enumerate(plan, 1):
            r = run_trial(number, fault, busy, rng, args, calibrations[fault.layout, busy], root)
            results.append(r)
            figures = [f"{r['restarts']} restart(s)", f"{r['seconds']:.1f} s"]
            figures += [] if r["lost"] is None else [f"lost {r['lost']:+.1f} s"]
            figures += [] if r["redone"] is None else [f"redone {r['redone']:.1f} s"]
            print(f"trial {number:3d} {r['fault']:22s} {'busy' if busy else 'idle'}: {r['outcome']}"
                  f"{'' if r['ok'] else ' (UNEXPECTED)'}{': ' + r['reason'] if r['reason'] else ''}; "
                  f"{'; '.join(r['notes'] + figures)}", flush=True)
            for line in r["tail"]:
                print(line)
        summarize(results, faults, loads)
        bad = [r for r in results if not r["ok"]]
        print(f"\n{len(results) - len(bad)}/{len(results)} trials as their fault expects; "
              f"{time.monotonic() - begin:.0f} s in all")
        for r in bad:
            load = "busy" if r["busy"] else "idle"
            said = "; ".join(([r["reason"]] if r["reason"] else []) + r["notes"])
            print(f"  trial {r['number']} {r['fault']} ({load}): {r['outcome']}: {said}")
        return 1 if bad else 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
