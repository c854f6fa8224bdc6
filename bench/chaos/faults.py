"""The faults of the chaos matrix. Each waits for a random moment inside its window of a running job, strikes,
and does what the world would do next (a supervisor restarts a killed agent, redis comes back, a cable is
plugged in again, a person frees the full disk and runs the job again)."""
import os
import re
import signal
import time

from . import checkpoints
from .job import alive

MOMENTS = ["rendezvous", "first-step", "mid-epoch", "checkpoint", "final"]
DISK_FULL = r"No space left|disk is full|disk full|ENOSPC"


class Fault:
    """`layout`: "loopback" (one agent, 3 shards on 127.0.0.1) or "netns" (2 agents of 1 shard, each in its
    own network namespace). `store`: where agents and shards meet and checkpoints go: "file" (a directory),
    "redis" (our redis-server, checkpoints in a directory) or "disk" (a directory on a small tmpfs).
    `expect`: "recovered" (bit for bit) or "loud stop" (a reason a person must fix)."""

    def __init__(self, name, inject, layout="loopback", store="file", expect="recovered"):
        self.name, self.inject, self.layout, self.store, self.expect = name, inject, layout, store, expect


class Trial:
    """What a fault needs: the running job, the trial's random choices, the reference run's timings, and
    where to note what it did. `fault_time` is the strike, in seconds on the job's clock."""

    def __init__(self, number, fault, busy, rng, args, calibration, checkpoint_dir, deadline):
        self.number, self.fault, self.busy, self.rng, self.args = number, fault, busy, rng, args
        self.calibration, self.checkpoint_dir, self.deadline = calibration, checkpoint_dir, deadline
        self.job = None            # the job the outcome is judged on
        self.jobs = []             # every job the trial started
        self.environment = None    # the trial's RedisServer, SmallDisk or Namespaces
        self.fault_time = None
        self.first_stop = None     # disk full: the last line of the job that stopped
        self.corrupted = None      # corrupt checkpoint: the file it corrupted
        self.notes = []
        self.missed_expectations = []  # what the fault expects beside the outcome, and did not see


def _running(trial):
    return trial.job.running() and time.monotonic() < trial.deadline


def _pause(trial, seconds):
    """Sleeps `seconds` unless the job ends first; True when it still runs."""
    end = time.monotonic() + seconds
    while time.monotonic() < end and _running(trial):
        time.sleep(min(0.01, max(0.0, end - time.monotonic())))
    return _running(trial)


def _round0_pids(trial):
    """{shard id: pid} of round 0's shards (every agent's), once the agents have started them."""
    pids = {}
    for slot in range(trial.job.layout.agents):
        if not trial.job.wait_for(r"round 0: run id", trial.deadline - time.monotonic(), slot=slot):
            trial.notes.append("the shards never started")
            return {}
        pids.update(trial.job.round_pids(0, slot))
    return pids


def _wait_joined(trial):
    """Waits until every shard of round 0 has joined (they check the model, broadcast it and step next)."""
    needed = trial.job.layout.num_shards
    while _running(trial):
        joined = [line for _, line in trial.job.snapshot() if re.search(r"\[shard \d+\] joined ", line)]
        if len(joined) >= needed:
            return True
        time.sleep(0.002)
    return False


def _wait_background_write(trial):
    """Waits for one of the mid-epoch checkpoints (the background writer's), picked at random: returns while
    it is written (its temporary file is there) or, when the write was too quick to see, right after."""
    skip = trial.rng.randrange(max(1, trial.calibration.background_writes))
    seen = set()
    while _running(trial):
        for file in os.listdir(trial.checkpoint_dir):
            match = re.fullmatch(r"m_iter(\d+)\.safetensors(\.tmp\.\d+)?", file)
            if match and match.group(1) not in seen:
                seen.add(match.group(1))
                if len(seen) > skip:
                    trial.notes.append(f"{'while' if match.group(2) else 'just after'} m_iter{match.group(1)} "
                                       f"was written")
                    return True
        time.sleep(0.0005)
    return False


def _wait_final(trial):
    final = os.path.join(trial.checkpoint_dir, f"m_{trial.args.epochs}.safetensors")
    while _running(trial):
        if os.path.exists(final):
            return True
        time.sleep(0.0005)
    return False


def _wait_iteration(trial, lowest=2):
    """Waits until a shard reports a random iteration of the run, from `lowest` to the last but one, and not
    one that ends with a checkpoint."""
    args = trial.args
    total, every = args.epochs * args.steps_per_epoch, args.checkpoint_every_iters
    choices = [i for i in range(lowest, total) if i % args.steps_per_epoch and not (every and i % every == 0)]
    target = trial.rng.choice(choices or [total])
    while _running(trial):
        if trial.job.iteration() >= target:
            trial.notes.append(f"at iteration {target}")
            return True
        time.sleep(0.002)
    return False


def _reach(trial, moment):
    """Waits for a random moment of the window; True when the job still runs then. The windows: rendezvous
    from the shards' start to the last one joined; first-step from there to the end of the first step (the
    model check, the broadcast and the step); mid-epoch any step but the first and the last, not at a
    checkpoint; checkpoint and final as their waits say."""
    if moment == "rendezvous":
        return _pause(trial, trial.rng.uniform(0, trial.calibration.join_seconds))
    if moment == "checkpoint":
        return _wait_background_write(trial)
    if moment == "final":
        return _wait_final(trial)
    if moment == "mid-epoch":
        return _wait_iteration(trial)
    if not _wait_joined(trial):
        return False
    end = time.monotonic() + trial.rng.uniform(0, trial.calibration.first_step_seconds)
    while _running(trial) and time.monotonic() < end and trial.job.iteration() < 1:
        time.sleep(0.001)
    return _running(trial)


def signal_shard(sent, moment):
    def inject(trial):
        pids = _round0_pids(trial)
        if not pids or not _reach(trial, moment):
            trial.notes.append(f"the job ended before the {moment} moment")
            return
        if moment == "checkpoint":
            victim = 0  # the writer
        else:
            living = [s for s, p in pids.items() if alive(p)] or list(pids)
            victim = trial.rng.choice(sorted(living))
        try:
            os.kill(pids[victim], sent)
        except ProcessLookupError:
            pass
        trial.fault_time = trial.job.now()
        trial.notes.append(f"{signal.Signals(sent).name} shard {victim} at {trial.fault_time:.2f} s")
    return inject


def kill_agent(moment):
    def inject(trial):
        if not _round0_pids(trial) or not _reach(trial, moment):
            trial.notes.append(f"the job ended before the {moment} moment")
            return
        agent = trial.job.agents[0]
        agent.kill()
        agent.wait()
        trial.fault_time = trial.job.now()
        trial.notes.append(f"SIGKILL agent at {trial.fault_time:.2f} s, started again with the same --job_id")
        trial.job.start_agent(0)
    return inject


def restart_redis(trial):
    if not _round0_pids(trial) or not _reach(trial, "mid-epoch"):
        trial.notes.append("the job ended before redis was killed")
        return
    redis = trial.environment
    redis.kill()
    trial.fault_time = trial.job.now()
    down = trial.rng.uniform(0.3, 2.0)
    time.sleep(down)
    redis.start()
    trial.notes.append(f"redis-server SIGKILLed at {trial.fault_time:.2f} s, back (empty) {down:.2f} s later")


def fill_disk(trial):
    """Fills the disk as a background checkpoint write begins. A full disk is for a person to fix: the job must
    stop and say so; then, with the space freed, the same command (a fresh --job_id) must finish bit for bit."""
    if not _round0_pids(trial) or not _reach(trial, "checkpoint"):
        trial.notes.append("the job ended before the disk was filled")
        return
    written = trial.environment.fill()
    trial.fault_time = trial.job.now()
    trial.notes.append(f"disk filled at {trial.fault_time:.2f} s ({written >> 20} MiB)")
    codes = trial.job.finish(trial.deadline)
    if None in codes or all(code == 0 for code in codes):
        return  # a hang, or the job needed no more space: judged as it is
    trial.first_stop = trial.job.output(0)[-1] if trial.job.output(0) else ""
    trial.environment.free()
    rerun = trial.job.rerun(trial.job.job_id + "_again")
    trial.jobs.append(rerun)
    trial.job = rerun
    rerun.start_all()


def corrupt_newest(trial):
    """Kills shard 0 with the agent paused, corrupts the newest checkpoint, and lets the agent restart the
    job: the restart must pass over the corrupt file and resume from the one before."""
    pids = _round0_pids(trial)
    if not pids or not _wait_iteration(trial, lowest=2 * trial.args.checkpoint_every_iters + 1):
        trial.notes.append("the job ended before the corruption")
        return
    while _running(trial) and len(checkpoints.checkpoints(trial.checkpoint_dir)) < 2:
        time.sleep(0.01)
    agent = trial.job.agents[0]
    agent.send_signal(signal.SIGSTOP)
    try:
        os.kill(pids[0], signal.SIGKILL)
        while alive(pids[0]):
            time.sleep(0.001)
        trial.fault_time = trial.job.now()
        newest = checkpoints.checkpoints(trial.checkpoint_dir)
        if len(newest) < 2:
            trial.notes.append("fewer than 2 checkpoints to choose from; nothing corrupted")
            return
        tensor, offset = checkpoints.corrupt(newest[0], trial.rng)
        trial.corrupted = newest[0]
        trial.notes.append(f"shard 0 SIGKILLed at {trial.fault_time:.2f} s; corrupted {os.path.basename(newest[0])} "
                           f"(tensor {tensor}, byte {offset}); previous: {os.path.basename(newest[1])}")
    finally:
        agent.send_signal(signal.SIGCONT)


def cut_network(trial):
    """Pulls one machine's cable while the job trains; the other machine's shard must stop within --timeout
    (and a little for the agent to notice) naming the lost shard; the cable goes back once an agent has
    noticed, and the job must finish bit for bit."""
    job, namespaces, args = trial.job, trial.environment, trial.args
    if not _round0_pids(trial) or not _reach(trial, "mid-epoch"):
        trial.notes.append("the job ended before the cut")
        return
    cut = trial.rng.randrange(job.layout.agents)
    lost = sorted(job.round_pids(0, slot=cut))
    namespaces.cut(cut)
    trial.fault_time = job.now()
    allowed = args.timeout + 2
    limit = min(trial.deadline, time.monotonic() + 3 * args.timeout + args.first_iter_timeout)
    # The other machine's shard stopping with an error is what counts, not the cut machine's own.
    error = job.wait_for(r"\] .*error", limit - time.monotonic(), after=trial.fault_time, slot=1 - cut)
    trial.notes.append(f"machine {cut} (shard {', '.join(map(str, lost))}) cut off at {trial.fault_time:.2f} s")
    if not error:
        waited = limit - job.start - trial.fault_time
        trial.missed_expectations.append(f"the other machine's shard did not stop within {waited:.0f} s")
    else:
        seconds = error[0] - trial.fault_time
        trial.notes.append(f"the other machine's shard stopped after {seconds:.2f} s: {error[1][:200]}")
        if seconds > allowed:
            trial.missed_expectations.append(f"it stopped after {seconds:.2f} s, over --timeout {args.timeout} + 2 s")
        if not any(re.search(rf"\bshard {shard}\b", error[1]) for shard in lost):
            trial.missed_expectations.append("its error does not name the lost shard")
        job.wait_for(r"stopping shards", limit - time.monotonic(), after=trial.fault_time)
        time.sleep(trial.rng.uniform(0, 1))
    namespaces.restore(cut)


def catalogue():
    faults = []
    for moment in MOMENTS:
        faults.append(Fault(f"kill-shard@{moment}", signal_shard(signal.SIGKILL, moment)))
        faults.append(Fault(f"stop-shard@{moment}", signal_shard(signal.SIGSTOP, moment)))
        faults.append(Fault(f"kill-agent@{moment}", kill_agent(moment)))
    faults.append(Fault("redis-restart", restart_redis, store="redis"))
    faults.append(Fault("disk-full", fill_disk, store="disk", expect="loud stop"))
    faults.append(Fault("corrupt-checkpoint", corrupt_newest))
    faults.append(Fault("partition", cut_network, layout="netns"))
    return faults
