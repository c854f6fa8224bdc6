"""A `lockstep launch` job of the chaos matrix: its agents (one per machine slot, restarted in place as a
supervisor would), their output lines timestamped as they arrive, and the end of every process they started."""
import os
import re
import signal
import subprocess
import threading
import time


# A shard's progress line, one per step: "[shard 1] 2026-...Z epoch 2/3 iter 17/100: ...".
PROGRESS = re.compile(r"\[shard \d+\] \S+ epoch (\d+)/\d+ iter (\d+)/(\d+):")


class Layout:
    """Where a job's agents run: `agents` agents of `shards` shards each, each agent in its own network
    namespace when `namespaces` is given, the shards talking over `interface`."""

    def __init__(self, name, agents, shards, interface="lo", namespaces=None):
        self.name, self.agents, self.shards, self.interface = name, agents, shards, interface
        self.namespaces = namespaces  # one per agent, or None: the host's

    @property
    def num_shards(self):
        return self.agents * self.shards


def training_arguments(args, layout, log_dir):
    """`train` and its flags; the global batch is 24 on every layout (8 per shard on 3 shards). Every shard prints
    a line per step, so the faults can strike at a chosen iteration."""
    global_batch = 24
    return ["train", "--use_cpu", "--threads", "1", "--distributed_interfaces", layout.interface,
            "--model", "lenet", "--train_data", "fashion-mnist",
            "--batch_size", str(global_batch // layout.num_shards),
            "--epoch_size", str(args.steps_per_epoch * global_batch), "--num_epochs", str(args.epochs),
            "--base_learning_rate", "0.1", "--momentum", "0.9", "--save_model_name", "m",
            "--checkpoint_every_iters", str(args.checkpoint_every_iters), "--log_every_iters", "1",
            "--log_dir", log_dir, "--timeout", str(args.timeout), "--first_iter_timeout",
            str(args.first_iter_timeout)]


def alive(pid):
    """True while `pid` runs or is stopped (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def command_line(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


class Job:
    """The agents of one job. Lines of every agent go into one list of (seconds since the job started, slot,
    agent number, line), in the order they arrived; agent numbers count the agents started, restarts included."""

    def __init__(self, lockstep, layout, rdzv, job_id, train_arguments, max_restarts=3):
        self.lockstep, self.layout, self.rdzv, self.job_id = lockstep, layout, rdzv, job_id
        self.train_arguments, self.max_restarts = train_arguments, max_restarts
        self.start = time.monotonic()
        self.lines = []
        self.agents = [None] * layout.agents  # the newest agent process of each slot
        self.all_agents = []
        self.shard_pids = set()
        self._iteration = 0
        self._lock = threading.Lock()
        self._readers = []

    def rerun(self, job_id):
        """The same job under another id, not started: what a person runs again after fixing a fault."""
        return Job(self.lockstep, self.layout, self.rdzv, job_id, self.train_arguments, self.max_restarts)

    def now(self):
        return time.monotonic() - self.start

    def start_agent(self, slot):
        command = [self.lockstep, "launch", "--nproc_per_node", str(self.layout.shards),
                   "--nnodes", str(self.layout.agents), "--max_restarts", str(self.max_restarts),
                   "--monitor_interval", "0.2", "--job_id", self.job_id, "--rdzv", self.rdzv, "--"]
        command += self.train_arguments
        if self.layout.namespaces:
            command = ["ip", "netns", "exec", self.layout.namespaces[slot]] + command  # ip execs the agent
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   errors="replace")
        self.agents[slot] = process
        self.all_agents.append(process)
        reader = threading.Thread(target=self._read, args=(slot, len(self.all_agents) - 1, process), daemon=True)
        reader.start()
        self._readers.append(reader)
        return process

    def start_all(self):
        for slot in range(self.layout.agents):
            self.start_agent(slot)

    def _read(self, slot, number, process):
        for line in process.stdout:
            line = line.rstrip("\n")
            with self._lock:
                self.lines.append((self.now(), slot, number, line))
                for pid in re.findall(r"shard \d+ pid (\d+)", line) if "run id" in line else []:
                    self.shard_pids.add(int(pid))
                progress = PROGRESS.search(line)
                if progress:
                    epoch, step, per_epoch = map(int, progress.groups())
                    self._iteration = max(self._iteration, (epoch - 1) * per_epoch + step)

    def snapshot(self, slot=None):
        with self._lock:
            return [(when, line) for when, s, _, line in self.lines if slot is None or s == slot]

    def output(self, slot):
        """The lines of the newest agent of `slot`."""
        number = self.all_agents.index(self.agents[slot])
        with self._lock:
            return [line for _, _, n, line in self.lines if n == number]

    def first(self, pattern, after=0.0, slot=None):
        for when, line in self.snapshot(slot):
            if when >= after and re.search(pattern, line):
                return when, line
        return None

    def running(self):
        return any(agent.poll() is None for agent in self.agents)

    def wait_for(self, pattern, limit, after=0.0, slot=None):
        """The first line matching `pattern`, waiting up to `limit` seconds while an agent runs."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline and self.running():
            found = self.first(pattern, after, slot)
            if found:
                return found
            time.sleep(0.002)
        return self.first(pattern, after, slot)

    def iteration(self):
        """The highest iteration (counted over the whole run, from 1) that a shard has reported."""
        return self._iteration

    def round_pids(self, round_number, slot=0):
        """{shard id: pid} of this slot's shards in `round_number`, once the agent has started them."""
        found = self.first(rf"round {round_number}: run id", slot=slot)
        return {int(s): int(p) for s, p in re.findall(r"shard (\d+) pid (\d+)", found[1])} if found else {}

    def finish(self, deadline):
        """Waits for every slot's newest agent until the monotonic `deadline`; returns their exit codes
        (None: still running at the deadline)."""
        codes = []
        for agent in self.agents:
            try:
                codes.append(agent.wait(max(0.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                codes.append(None)
        return codes

    def stray_shards(self):
        """Shard processes of this job still alive (its run id is in their command line)."""
        stray = []
        for pid in self.shard_pids:
            argv = command_line(pid)
            run_ids = [argv[i + 1] for i in range(len(argv) - 1) if argv[i] == b"--run_id"]
            if alive(pid) and any(r.startswith(f"{self.job_id}_r".encode()) for r in run_ids):
                stray.append(pid)
        return stray

    def kill(self):
        """Ends every agent and shard this job started (SIGKILL, by pid) and waits for the readers."""
        for agent in self.all_agents:
            if agent.poll() is None:
                agent.kill()
        for agent in self.all_agents:
            try:
                agent.wait(10)
            except subprocess.TimeoutExpired:
                pass
        for pid in self.stray_shards():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for reader in self._readers:
            reader.join(5)
