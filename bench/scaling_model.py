#!/usr/bin/python3
"""Scaling model of a data-parallel lockstep step: compute from a 1-shard trace, bucketed allreduces alpha-beta.

One step on N shards replays the 1-shard step's operators (forward, backward, update) from a trace. Buckets
follow Parallelize: trainable parameters in reverse creation order (the traced MomentumSGDUpdate order,
reversed), planned by the library itself (--allreduce_bucket_mb B, --allreduce_tail_bucket_mb T: see
PlanGradientBuckets). Shapes come from a checkpoint's safetensors header. Bucket i goes to channel i % K
(--allreduce_channels); a channel runs its allreduces one at a time in order, each starting once its gradients
are written. With --allreduce_dtype bfloat16 or float16 (run.sh's wire column) a bucket crosses the links in 2
bytes per value, half its bytes, and the call first spends the shard's CPU time on the conversions: narrowing
the bucket, widening, adding and rounding the (N-1)/N of it that each shard sums, widening the result
(--wire_ns, from bench/wire_conversion.cc).

An allreduce runs in phases (`phases`), each its steps (rounds) of link latency, then its transfers: every shard
sends its buffers (multiples of b bytes) over its own link at B, all at once; a phase ends when all have sent.
Where shards outnumber the cores that limit the link, a round lasts at least the wait for a descheduled peer,
and ring_chunked's overlapped steps (below) run in series. Calls in flight at once share each link equally, up
to what one call can use:
  ring              2(N-1) steps, N-1 buffers per shard (Gloo's plain ring passes the whole buffer around)
  ring_chunked      4N-3 steps, 2N-1 of them overlapping its transfers (double-buffered), 2(N-1)/N buffers
  halving_doubling  2 log2(N) + 2 steps, 2(N-1)/N buffers for N a power of two; else Gloo's two binary blocks of
                    P (the largest power of two below N) and R = N - P shards: both reduce-scatter while the R
                    scatter their share into the P-block ((P-1)/P and 1 buffers), then the P-block sends the
                    reduced parts back while it allgathers (1 buffer each), then the R-block allgathers
  bcube             as halving_doubling for N a power of two (base 2)
While an allreduce lines up or transfers, compute runs `overlap` slower (copies and kernels compete with
backward); waiting out a link latency costs it nothing.
After the backward the one compute thread updates the parameters of each bucket once its allreduce is done
(DagNet runs the updates as their sums come in, each bucket's share of the traced update time by its bytes);
the step ends when the last update does.

Calibrate mode (default) fits shared parameters to bench/notes/multihost.md's tables (an effective bandwidth
per link; the time 2 shards take to line up at the first allreduce of each channel in a step, which on N shards
is a wait for the latest of N and grows as the expected maximum of N normal draws; when shards
outnumber cores, the share of a network-limited link a blocking algorithm leaves idle, and on links the shared
cores limit the time a round waits for a descheduled peer; compute's slowdown while the shared cores carry
transfers) and prints predicted against measured step times: in-sample, and for three groups of
rows from fits to the others (3 shards; added latency; bucket plans other than 8 MiB, no tail, 1 channel).
Where delay.py adds the latency, what it adds of its own (--delay_extra_ms) counts in every step, and on links
the shared cores limit a share (--delay_cpu_share) of its measured CPU time per step is taken from the shards,
spread over the 2 cores.
--project predicts ResNet-50 on 8-GPU H100 machines and picks the best configuration.

usage: scaling_model.py --trace T.train.json --checkpoint M.safetensors [--tables bench/notes/multihost.md]
                          [--predict RUN_OUTPUT ...]
       scaling_model.py --project --trace resnet50.train.json --checkpoint resnet50.safetensors
"""

import argparse
import functools
import json
import math
import multiprocessing
import os
import re
import statistics
import struct
import sys

# The lockstep package of PYTHONPATH, else the build folder's.
sys.path.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "python"))
from lockstep._core import C  # noqa: E402


def parse_op(describe):
    """Splits a trace op description 'Type(in1, in2) -> out1, out2' into (type, inputs, outputs)."""
    m = re.match(r"(\w+)\((.*?)\)(?: -> (.*))?$", describe)
    split = lambda s: [x.strip() for x in s.split(",") if x.strip()] if s else []
    return m.group(1), split(m.group(2)), split(m.group(3))


def read_profile(trace_path, skip):
    """Per-step operator timeline of a 1-shard trace: the median step after `skip` warm-up steps.

    Returns dict with backward_end (s from step start), update_s, step_s and grad_ready: {param: seconds from
    step start when its gradient is last written}, plus params: trainable parameters in creation order."""
    with open(trace_path) as f:
        trace = json.load(f)
    events = [e for e in (trace["traceEvents"] if isinstance(trace, dict) else trace) if e.get("ph") == "X"]
    events.sort(key=lambda e: e["ts"])
    starts = [i for i, e in enumerate(events) if e["name"] == "ReadBatch"] + [len(events)]
    steps = [events[a:b] for a, b in zip(starts, starts[1:])][skip:]
    if not steps:
        raise ValueError(f"{trace_path}: no steps after --skip {skip}")
    step = sorted(steps, key=lambda s: s[-1]["ts"] + s[-1]["dur"] - s[0]["ts"])[len(steps) // 2]
    t0 = step[0]["ts"]
    ops = [(parse_op(e["args"]["op"]), (e["ts"] - t0) / 1e6, (e["ts"] + e["dur"] - t0) / 1e6) for e in step]
    last_grad = max(i for i, ((kind, _, _), _, _) in enumerate(ops) if kind.endswith("Gradient"))
    params = [ins[-1].split("/", 1)[-1] for (kind, ins, _), _, _ in ops if kind == "MomentumSGDUpdate"]
    grad_ready = {}
    for (kind, _, outs), _, end in ops[: last_grad + 1]:
        for out in outs:
            name = out.split("/", 1)[-1]
            if name.endswith("_grad"):
                grad_ready[name[: -len("_grad")]] = end
    backward_end = ops[last_grad][2]
    step_s = ops[-1][2]
    return {"params": params, "grad_ready": grad_ready, "backward_end": backward_end,
            "update_s": step_s - backward_end, "step_s": step_s}


def read_shapes(checkpoint):
    """Tensor shapes from a safetensors file's JSON header (the data is not read)."""
    with open(checkpoint, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return {k: v["shape"] for k, v in header.items() if k != "__metadata__"}


def plan_buckets(params, shapes, bucket_bytes, tail_bytes=0):
    """Parallelize's bucket plan in reduce order (params reversed), from the library's own planner
    (PlanGradientBuckets): a list of (bytes, [params])."""
    blobs = [(p, shapes[p]) for p in reversed(params)]
    return C.plan_gradient_buckets(blobs, int(bucket_bytes), int(tail_bytes))


def phases(algorithm, n):
    """One allreduce on n shards as phases run one after another: [(latency steps, overlapped steps, {shard
    class: (shards in it, buffers each of them sends)})]. A phase waits its latency steps, then the shards of
    each class send alike, each on its own link, all classes at once; it ends when every shard has sent its
    part and at least the overlapped steps have passed."""
    # Steps are one-way link latencies per call, of the data and of the notifications that gate Gloo's sends,
    # as measured with 4 KB allreduces over a delayed loopback (bench/notes/multihost.md): 2(N-1), 4N-3, 2 log2(N) + 2.
    if n <= 1:
        return []
    if algorithm == "ring":  # Gloo's plain ring passes the whole buffer around
        return [(2 * (n - 1), 0, {"all": (n, n - 1)})]
    if algorithm == "ring_chunked":  # double-buffered: the notifications overlap the other buffer's transfer
        return [(2 * (n - 1), 2 * n - 1, {"all": (n, 2 * (n - 1) / n)})]
    p = 1 << (n.bit_length() - 1)
    if p == n:  # halving_doubling; bcube with base 2
        return [(2 * math.log2(n) + 2, 0, {"all": (n, 2 * (n - 1) / n)})]
    r = n - p
    if algorithm != "halving_doubling" or r & (r - 1):
        raise ValueError(f"{algorithm} on {n} shards is not modelled (halving_doubling in two binary blocks is)")
    # Gloo's binary blocks (allreduce_halving_doubling.h): both blocks reduce-scatter within themselves while
    # the smaller block's shards scatter what they hold into the larger block; then the larger block sends its
    # reduced parts back while it allgathers, and the smaller block allgathers what it got.
    return [(math.log2(p) + 1, 0, {"large": (p, (p - 1) / p), "small": (r, (r - 1) / r + 1 / r)}),
            (math.log2(p) + 1, 0, {"large": (p, 1 / p + (p - 1) / p)}),
            (math.log2(r), 0, {"small": (r, (r - 1) / r)})]  # empty for R = 1


def updates_by_bytes(seconds, buckets):
    """A step's parameter update time split over the buckets by their bytes (the updates are elementwise)."""
    total = sum(size for size, _ in buckets)
    return [seconds * size / total for size, _ in buckets]


def simulate(ready, backward_end, updates, calls, channels, overlap):
    """Event-driven step: compute progresses at 1, or 1/(1+overlap) while an allreduce is past a phase's latency
    (lining up or transferring), through the backward and then the parameter updates of the buckets whose
    allreduce is done, idle while none is.

    ready[i]: compute seconds at which bucket i's gradients are written; updates[i]: compute seconds of its
    parameters' updates; calls[i] = (phases, cap): phases [(latency s, overlapped latency s, {link: transfer s
    at the full link})] one after another, each its latency, then its transfers on all its links at once,
    lasting at least the overlapped latency; on each link the transfers in flight share it equally up to cap
    (the largest share one call can use), what a capped one leaves going to the others; bucket i runs on
    channel i % channels after bucket i - channels. Returns dict: step, exposed (compute idle after the
    backward, waiting for allreduces), busy (summed call durations, as the trace sums Allreduce operators),
    in_flight (time with any call in flight), backward_wall."""
    n = len(calls)
    phase = [-1] * n  # -1: not started; len(phases): done
    latency = [0.0] * n  # latency left of the current phase
    floor = [0.0] * n  # overlapped latency left of the current phase, once its transfers run
    left = [{} for _ in range(n)]  # transfer s left per link of the current phase
    start, end = [0.0] * n, [0.0] * n
    t = progress = in_flight = exposed = 0.0
    backward_wall = None
    work = backward_end + sum(updates)
    done = lambda i: phase[i] == len(calls[i][0])

    def next_phase(i):  # skips empty phases
        phase[i] += 1
        while not done(i):
            latency[i], floor[i], transfers = calls[i][0][phase[i]]
            left[i] = {link: s for link, s in transfers.items() if s > 0}
            if latency[i] > 0 or floor[i] > 0 or left[i]:
                return
            phase[i] += 1
        end[i] = t

    while True:
        for i in range(n):
            free = i < channels or done(i - channels)
            if phase[i] < 0 and free and progress >= ready[i] - 1e-12:
                start[i] = t
                next_phase(i)
        if backward_wall is None and progress >= backward_end - 1e-12:
            backward_wall = t
        flying = [i for i in range(n) if phase[i] >= 0 and not done(i)]
        if progress >= work - 1e-12 and all(map(done, range(n))):
            break
        available = backward_end + sum(u for i, u in enumerate(updates) if done(i))
        share = {}  # per link, water-filling: the lowest caps first
        for link in {link for i in flying for link in left[i]}:
            moving = sorted((i for i in flying if latency[i] <= 0 and link in left[i]), key=lambda i: calls[i][1])
            capacity = 1.0
            for k, i in enumerate(moving):
                share[i, link] = min(calls[i][1], capacity / (len(moving) - k))
                capacity -= share[i, link]
        # waiting out a link's latency costs no compute; lining up and transfers do
        busy = any(latency[i] <= 0 for i in flying)
        rate = (1 / (1 + overlap) if busy else 1.0) if progress < available - 1e-12 else 0.0
        steps = [latency[i] for i in flying if latency[i] > 0]
        steps += [floor[i] for i in flying if latency[i] == 0 and floor[i] > 0]
        steps += [s / share[key] for key, s in ((k, left[k[0]][k[1]]) for k in share)]
        if rate > 0:
            targets = [r for i, r in enumerate(ready) if phase[i] < 0 and r > progress]
            targets += [x for x in (backward_end, available) if x > progress]
            steps.append((min(targets) - progress) / rate)
        dt = max(0.0, min(steps))
        t += dt
        in_flight += dt if flying else 0.0
        exposed += dt if rate == 0 else 0.0
        progress += dt * rate
        for i in flying:
            if latency[i] > 0:
                latency[i] = 0.0 if latency[i] - dt <= 1e-12 else latency[i] - dt
            else:
                floor[i] = 0.0 if floor[i] - dt <= 1e-12 else floor[i] - dt
                for link in list(left[i]):
                    left[i][link] -= dt * share[i, link]
                    if left[i][link] <= 1e-12:
                        del left[i][link]
            if latency[i] == 0 and floor[i] == 0 and not left[i]:
                next_phase(i)
    return {"step": t, "exposed": exposed, "busy": sum(e - s for s, e in zip(start, end)),
            "in_flight": in_flight, "backward_wall": backward_wall}


def read_table(path):
    """Rows of the tables of the "Shards over shaped links" section of a Markdown file (bench/notes/multihost.md,
    where it is the page's title), up to the next heading of its level or higher: dicts of shards, gbit, latency
    (ms), algorithm, bucket, tail, channels, step, allreduce and delay_cpu (delay.py's CPU s per step), means of
    the invocations' `a / b` cells. Columns are found by their headers; a table without latency, bucket plan or delay.py CPU
    columns had none added, 8 MiB buckets without a tail on 1 channel, and no delay.py."""
    text = open(path).read()
    heading = re.search(r"^(#+) Shards over shaped links.*$", text, re.MULTILINE)
    if not heading:
        raise ValueError(f"{path}: no section 'Shards over shaped links'")
    text = text[heading.end():]
    following = re.search(rf"^#{{1,{len(heading.group(1))}}} ", text, re.MULTILINE)
    text = text[: following.start()] if following else text
    defaults = {"latency ms": "0", "bucket MiB": "8", "tail MiB": "0", "channels": "1", "wire": "float",
                "delay.py CPU s/step": "0"}
    rows, header = [], None
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "shards":
            header = cells
        elif header and len(cells) == len(header) and cells[0].isdigit():
            rows.append(table_row(dict(defaults, **dict(zip(header, cells)))))
    return rows


def table_row(cell):
    """A row from its cells by column header; measured cells hold one value per invocation, `a / b`."""
    mean = lambda s: statistics.mean(float(x) for x in s.split("/"))
    return {"shards": int(cell["shards"]), "gbit": float(cell["Gbit/s"]), "latency": mean(cell["latency ms"]),
            "algorithm": cell["algorithm"], "bucket": float(cell["bucket MiB"]), "tail": float(cell["tail MiB"]),
            "channels": int(cell["channels"]), "wire": cell.get("wire", "float"), "step": mean(cell["step s"]),
            "allreduce": mean(cell["allreduce s/step"]), "delay_cpu": mean(cell["delay.py CPU s/step"])}


def read_runs(paths):
    """Rows of multihost/run.sh outputs, one invocation per file, as read_table gives them: means over the
    files, which must have run the same configurations in the same order."""
    runs = []
    for path in paths:
        with open(path) as f:
            rows = [line.split() for line in f if line[:1].isdigit()]
        # outputs from before the wire column sent float32
        runs.append([r[:7] + ["float"] + r[7:] if len(r) == 11 else r for r in rows])
        if not runs[-1]:
            raise ValueError(f"{path}: no rows of multihost/run.sh output")
    if any(len(run) != len(runs[0]) or [c[:8] for c in run] != [c[:8] for c in runs[0]] for run in runs):
        raise ValueError(f"{', '.join(paths)}: the invocations ran different configurations")
    # run.sh's columns under the tables' headers, the measured ones `a / b`; no latency or delay.py counts as 0
    header = ["shards", "Gbit/s", "latency ms", "algorithm", "bucket MiB", "tail MiB", "channels", "wire",
              "step s", "allreduce s/step", "hidden", "delay.py CPU s/step"]
    cell = lambda values: " / ".join("0" if v in ("none", "n/a") else v for v in values)
    rows = []
    for cells in zip(*runs):  # one configuration: its row in each invocation
        measured = [cell(column) for column in list(zip(*cells))[8:]]
        rows.append(table_row(dict(zip(header, [cell([c]) for c in cells[0][:7]] + [cells[0][7]] + measured))))
    return rows


CORES = 2  # of the machine the namespace runs shared
# bench/wire_conversion.cc on the machine of the latest tables (8 MiB, best of 20, 2026-11-28): ns per value of
# narrowing, a hop's add, widening
WIRE_NS = {"bfloat16": (0.355, 0.517, 0.075), "float16": (2.82, 5.50, 1.92)}


@functools.lru_cache
def expected_max_normal(n):
    """E[max of n standard normals], by integrating x * n * pdf(x) * cdf(x)^(n-1)."""
    pdf = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    cdf = lambda x: 0.5 * (1 + math.erf(x / math.sqrt(2)))
    h = 0.01
    return sum(x * n * pdf(x) * cdf(x) ** (n - 1) * h for x in (i * h for i in range(-800, 801)))


def lineup(n):
    """The wait for the latest of n shards to reach an allreduce, relative to 2 shards' wait: each shard arrives
    after its own compute with independent jitter, and the first to arrive waits for the last."""
    return expected_max_normal(n) / expected_max_normal(2)


def predict_row(row, theta, prof, shapes, args):
    """Simulated (step s, allreduce s per step) of one table row under parameters theta."""
    n, g = row["shards"], row["gbit"]
    scale = max(1.0, n / CORES) if args.contention else 1.0  # n one-thread shards on the shared cores
    buckets = plan_buckets(prof["params"], shapes, row["bucket"] * 2**20, row["tail"] * 2**20)
    # a shaper limits each shard's egress; on fast links the veth copies on the shared cores limit instead
    cpu_limited = g >= args.cpu_link_gbit
    # With more one-thread shards than cores a peer is at times descheduled. On a link the network limits,
    # ring, halving-doubling and bcube, which block at each step until the peer's data is in, leave the link
    # idle meanwhile, which other calls in flight can use (ring_chunked keeps two chunks in flight itself).
    # Where the cores limit the link they are never idle; instead each round of a call waits for the later of
    # the data and the peer getting a core.
    blocking = row["algorithm"] != "ring_chunked"
    cap = 1 / (1 + theta["idle"] * (scale - 1)) if blocking and not cpu_limited else 1.0
    peer_s = theta["peer_s"] * (scale - 1) if cpu_limited else 0.0

    # a step is one link latency, and what delay.py adds of its own where it adds the latency
    step = (row["latency"] + (args.delay_extra_ms if row["latency"] else 0.0)) / 1e3

    sixteen_bits = row["wire"] in ("bfloat16", "float16")

    def call(i, size):
        # the first call on each channel waits for the latest shard to line up; later ones find them in step
        out = [(0.0, theta["sync_s"] * lineup(n), {})] if i < row["channels"] else []
        if sixteen_bits:  # the shard's CPU narrows the bucket, adds (N-1)/N of it as parts come in, widens it
            narrow, add, widen = args.wire_ns or WIRE_NS[row["wire"]]
            out.append((0.0, scale * (size / 4) * (narrow + widen + add * (n - 1) / n) * 1e-9, {}))
            size /= 2  # 2 of a float's 4 bytes cross the links
        for steps, overlapped, classes in phases(row["algorithm"], n):
            if cpu_limited:  # the cores carry every shard's traffic
                sent = scale * sum(m * buffers for m, buffers in classes.values()) / n
                transfers = {"cores": sent * size / theta["bw", g]}
                # and no round hides behind the other buffer's transfer: in the traces a 9 MiB ring_chunked
                # call on 3 shards takes 8 to 10 ms longer at 1 ms than without latency, all 9 rounds
                steps, overlapped = steps + overlapped, 0
            else:
                transfers = {c: buffers * size / theta["bw", g] for c, (_, buffers) in classes.items()}
            # a round lasts the longer of the link latency and the wait for a descheduled peer
            out.append((steps * max(step, peer_s), overlapped * step, transfers))
        return out, cap

    calls = [call(i, size) for i, (size, _) in enumerate(buckets)]
    ready = [scale * max(prof["grad_ready"][p] for p in names) for _, names in buckets]
    # where the shared cores carry the transfers, compute slows while they run, and delay.py's CPU time there
    # (measured per step) is taken from the shards, less the TCP receive work it does for them
    overlap = theta["overlap"] if cpu_limited else 0.0
    updates = updates_by_bytes(scale * prof["update_s"], buckets)
    r = simulate(ready, scale * prof["backward_end"], updates, calls, row["channels"], overlap)
    return r["step"] + (args.delay_cpu_share * row["delay_cpu"] / CORES if cpu_limited else 0.0), r["busy"]


def nelder_mead(f, x0, iterations=600, step=0.3):
    """Minimises f from x0 (plain Nelder-Mead; the parameters are logs, so steps are relative)."""
    simplex = [list(x0)] + [[x + (step if i == j else 0) for j, x in enumerate(x0)] for i in range(len(x0))]
    values = [f(x) for x in simplex]
    for _ in range(iterations):
        order = sorted(range(len(simplex)), key=values.__getitem__)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        centre = [sum(c) / (len(simplex) - 1) for c in zip(*simplex[:-1])]
        point = lambda k: [c + k * (w - c) for c, w in zip(centre, simplex[-1])]
        xr = point(-1)  # reflect the worst through the centre
        vr = f(xr)
        new = (xr, vr)
        if vr < values[0]:
            xe = point(-2)
            ve = f(xe)
            new = (xe, ve) if ve < vr else new
        elif vr >= values[-2]:
            xc = point(-0.5 if vr < values[-1] else 0.5)
            vc = f(xc)
            new = (xc, vc) if vc < min(vr, values[-1]) else None
        if new:
            simplex[-1], values[-1] = new
        else:  # shrink towards the best
            simplex = [simplex[0]] + [[b + 0.5 * (x - b) for b, x in zip(simplex[0], s)] for s in simplex[1:]]
            values = [values[0]] + [f(x) for x in simplex[1:]]
    return simplex[min(range(len(simplex)), key=values.__getitem__)]


def fit(rows, prof, shapes, args):
    """Parameters minimising the squared log errors of step (and, weighted 1/4, allreduce) time over rows."""
    links = sorted({r["gbit"] for r in rows})
    keys = [("bw", g) for g in links] + ["sync_s", "idle", "overlap", "peer_s"]
    unpack = lambda x: dict(zip(keys, map(math.exp, x)))

    def loss(x):
        theta = unpack(x)
        total = 0.0
        for r in rows:
            step, busy = predict_row(r, theta, prof, shapes, args)
            total += math.log(step / r["step"]) ** 2 + 0.25 * math.log(busy / r["allreduce"]) ** 2
        return total

    x0 = [math.log(g * 1e9 / 8 * 0.5) for g in links] + [math.log(x) for x in (2e-3, 0.2, 0.2, 3e-4)]
    return unpack(nelder_mead(loss, nelder_mead(loss, x0)))  # restarted once: the first simplex can collapse


def print_rows(rows, predictions):
    """Prints a markdown table of measured against predicted times and how many rows are within 10%."""
    print("| shards | Gbit/s | latency ms | algorithm | bucket MiB | tail MiB | channels | wire | "
          "allreduce s meas / model | step s measured | step s model | error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    within = 0
    for r, (step, busy) in zip(rows, predictions):
        err = step / r["step"] - 1
        within += abs(err) <= 0.10
        print(f"| {r['shards']} | {r['gbit']:g} | {r['latency']:g} | {r['algorithm']} | {r['bucket']:g} | "
              f"{r['tail']:g} | {r['channels']} | {r['wire']} | {r['allreduce']:.3f} / {busy:.3f} | {r['step']:.3f} | "
              f"{step:.3f} | {100 * err:+.1f}% |")
    print(f"\n{within} of {len(rows)} configurations within 10%.\n")


def calibrate(args, prof, shapes):
    """Fits the shared parameters; prints predicted vs measured in-sample, for the rows where delay.py shares
    the cores that limit the link (predicted from the fit to the others), and for three groups of rows from a
    fit to the other rows."""
    rows = read_table(args.tables)
    new = read_runs(args.predict) if args.predict else []
    shared = lambda r: r["latency"] > 0 and r["gbit"] >= args.cpu_link_gbit
    predicted = [r for r in rows if shared(r)]
    rows = [r for r in rows if not shared(r)]
    buckets = plan_buckets(prof["params"], shapes, 8 * 2**20)
    print(f"1-shard trace: step {prof['step_s']:.4f} s, backward ends {prof['backward_end']:.4f} s, update "
          f"{prof['update_s']:.4f} s; {len(prof['params'])} parameters, {sum(b for b, _ in buckets) / 1e6:.1f} MB "
          f"({len(buckets)} buckets at 8 MiB); {len(rows)} rows fitted, {len(predicted)} predicted\n")
    old_plan = lambda r: (r["bucket"], r["tail"], r["channels"]) == (8, 0, 1)
    held_out_groups = [] if args.no_held_out else [
        ("3 shards predicted by a fit to the 2- and 4-shard rows only", lambda r: r["shards"] == 3),
        ("the rows with added latency predicted by a fit to the rows without", lambda r: r["latency"] > 0),
        ("other bucket plans predicted by a fit to the 8 MiB, no tail, 1 channel rows", lambda r: not old_plan(r)),
        ("the 16-bit wire rows predicted by a fit to the float32 ones", lambda r: r["wire"] != "float")]
    held_out_groups = [(title, [r for r in rows if held_out(r)], [r for r in rows if not held_out(r)])
                       for title, held_out in held_out_groups]
    held_out_groups = [g for g in held_out_groups if g[1] and g[2]]
    fitted = [rows] + [rest for _, _, rest in held_out_groups]
    with multiprocessing.Pool(min(len(fitted), os.cpu_count() or 1)) as pool:  # the fits are independent
        thetas = pool.starmap(fit, [(f, prof, shapes, args) for f in fitted])
    theta = thetas[0]
    links = ", ".join(f"B {8 * theta['bw', g] / 1e9:.2f} Gbit/s on the {g:g} Gbit/s link"
                      for g in sorted({r["gbit"] for r in rows}))
    print(f"fitted: line-up at each channel's first call {1e3 * theta['sync_s']:.1f} ms at 2 shards, "
          f"{lineup(3):.2f} and {lineup(4):.2f} times that at 3 and 4; blocking algorithms "
          f"leave {theta['idle']:.2f} * (N/2 - 1) of a call's link time idle on links the network limits; where "
          f"the cores limit it a round waits at least {1e3 * theta['peer_s']:.2f} * (N/2 - 1) ms for the peer; "
          f"compute {100 * theta['overlap']:.0f}% slower during transfers on links of >= {args.cpu_link_gbit:g} "
          f"Gbit/s; {links}")
    c = "max(1, N/2)" if args.contention else "1"
    print(f"compute(N) = compute(1) * {c}; links of >= {args.cpu_link_gbit:g} Gbit/s are limited by copies on "
          f"the shared cores: average buffers per shard * {c} / B\n\nin-sample:\n")
    print_rows(rows, [predict_row(r, theta, prof, shapes, args) for r in rows])
    if predicted:
        print(f"added latency on links of >= {args.cpu_link_gbit:g} Gbit/s, where delay.py competes with the "
              f"shards for the cores, predicted by the fit above ({args.delay_cpu_share:g} of delay.py's measured "
              f"CPU time per step taken from the shards, {args.delay_extra_ms:g} ms added to each latency "
              f"step):\n")
        print_rows(predicted, [predict_row(r, theta, prof, shapes, args) for r in predicted])
    if new:
        print(f"{', '.join(args.predict)}, predicted by the fit above:\n")
        print_rows(new, [predict_row(r, theta, prof, shapes, args) for r in new])
    for (title, group, _), theta in zip(held_out_groups, thetas[1:]):
        print(f"{title}:\n")
        print_rows(group, [predict_row(r, theta, prof, shapes, args) for r in group])


BUCKETS_MIB = (4, 8, 16, 25, 32, 64)  # the projection's search
TAILS_MIB = (0, 1, 2, 4)
CHANNELS = (1, 2, 4)


def project(args, prof, shapes):
    """ResNet-50 on 8-GPU H100 machines: the best configuration per GPU count and network bandwidth."""
    # the CPU trace's forward and backward stretched to the GPU step less its updates
    scale = (args.step_ms - args.update_ms) / 1e3 / prof["backward_end"]
    compute = args.step_ms / 1e3
    print(f"assumed: {args.img_s:g} img/s per GPU at batch {args.batch} -> compute {args.step_ms:.1f} ms/step, "
          f"of which {args.update_ms:g} ms of parameter updates (the CPU trace's forward and backward scaled by "
          f"{scale:.2e} to the rest); fp32 gradients; NVLink {args.nvlink_gbs:g} GB/s per GPU, "
          f"alpha {args.nvlink_alpha_us:g} us; network alpha {args.net_alpha_us:g} us per step; per-call overhead "
          f"{args.call_us:g} us; compute {args.overlap_pct:g}% slower while a collective transfers; per-GPU "
          f"step time coefficient of variation {args.cv_pct:g}% (the step waits for the slowest GPU)\n")
    braces = lambda values: "{" + ", ".join(map(str, values)) + "}"
    print("hierarchical allreduce: reduce-scatter over NVLink, 8 inter-node allreduces of 1/8 of the bucket "
          f"sharing the machine's link, allgather over NVLink; searched: inter-node algorithm, bucket "
          f"{braces(BUCKETS_MIB)} MiB, tail {braces(TAILS_MIB)} MiB, channels {braces(CHANNELS)}\n")
    print("| GPUs | Gbit/s | inter-node | bucket MiB | tail MiB | channels | in flight ms | exposed ms | "
          "overlap ms | stragglers ms | step ms | efficiency | limited by |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    plans = [(b, t, plan_buckets(prof["params"], shapes, b * 2**20, t * 2**20))
             for b in BUCKETS_MIB for t in TAILS_MIB]
    intra_steps, intra_factor = 2 * 7, 2 * 7 / 8  # reduce-scatter + allgather of 8 GPUs over NVLink
    for gbit in (100, 200, 400):
        for gpus in (8, 16, 32, 64, 128, 256):
            machines = gpus // 8
            slowest = 1 + args.cv_pct / 100 * expected_max_normal(gpus)  # the slowest GPU's compute
            stretch = scale * slowest
            best = None
            for algorithm in ("ring_chunked", "halving_doubling") if machines > 1 else ("-",):
                # one phase: 2^k machines
                ((steps, overlapped, classes),) = phases(algorithm, machines) or [(0, 0, {"all": (1, 0.0)})]
                factor = classes["all"][1]
                latency = 1e-6 * (args.call_us + intra_steps * args.nvlink_alpha_us + steps * args.net_alpha_us)
                per_byte = intra_factor / (args.nvlink_gbs * 1e9) + factor / (gbit / 8 * 1e9)
                for mib, tail, buckets in plans:
                    calls = [(latency, per_byte * size) for size, _ in buckets]
                    phased = [([(lat, 1e-6 * overlapped * args.net_alpha_us, {"net": transfer})], 1.0)
                              for lat, transfer in calls]
                    ready = [stretch * max(prof["grad_ready"][p] for p in names) for _, names in buckets]
                    updates = updates_by_bytes(slowest * args.update_ms / 1e3, buckets)
                    for channels in CHANNELS:
                        r = simulate(ready, stretch * prof["backward_end"], updates, phased,
                                     channels, args.overlap_pct / 100)
                        if best is None or r["step"] < best[0]["step"]:
                            best = (r, algorithm, mib, tail, channels, calls)
            r, algorithm, mib, tail, channels, calls = best
            comm = "latency" if sum(c[0] for c in calls) > sum(c[1] for c in calls) else "bandwidth"
            exposed = "exposed tail bucket" if r["exposed"] <= 1.05 * sum(calls[-1]) else comm
            losses = {"stragglers": (slowest - 1) * compute, exposed: r["exposed"],
                      "overlap": r["backward_wall"] - stretch * prof["backward_end"]}
            limit = max(losses, key=losses.get)
            limit += "" if limit == comm else f" (comm: {comm})"
            print(f"| {gpus} | {gbit} | {algorithm} | {mib:g} | {tail:g} | {channels} | {1e3 * r['in_flight']:.1f} | "
                  f"{1e3 * r['exposed']:.2f} | {1e3 * losses['overlap']:.2f} | {1e3 * losses['stragglers']:.2f} | "
                  f"{1e3 * r['step']:.1f} | {100 * compute / r['step']:.1f}% | {limit} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", required=True, help="1-shard <path>.train.json (LOCKSTEP_TRACE=<path>)")
    parser.add_argument("--checkpoint", required=True, help="the model's .safetensors (train --save_model_name)")
    parser.add_argument("--skip", type=int, default=5, help="warm-up steps of the trace to leave out (5)")
    parser.add_argument("--tables", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "notes",
                                                         "multihost.md"),
                        help="calibration: the Markdown file of the multihost/run.sh tables (bench/notes/multihost.md)")
    parser.add_argument("--no_contention", dest="contention", action="store_false",
                        help="calibration: no compute(N) = compute(1) * max(1, N/2) for 2 shared cores")
    parser.add_argument("--cpu_link_gbit", type=float, default=10,
                        help="calibration: links this fast are limited by CPU copies on the shared cores (10)")
    parser.add_argument("--delay_extra_ms", type=float, default=0.07,
                        help="calibration: latency delay.py adds to a packet beyond the configured one, ms (0.07)")
    parser.add_argument("--delay_cpu_share", type=float, default=0.6,
                        help="calibration: share of delay.py's CPU time the shards lose where the cores limit the "
                             "link (0.6)")
    parser.add_argument("--wire_ns", type=lambda text: [float(x) for x in text.split(",")], default=None,
                        metavar="NARROW,ADD,WIDEN",
                        help="calibration: CPU ns per float32 value of a 16-bit wire's narrowing, one hop's "
                             "widen-add-round and widening, as bench/wire_conversion.cc prints them, for every 16-bit "
                             "row (default: WIRE_NS of the row's wire dtype, measured on the machine of the latest "
                             "tables)")
    parser.add_argument("--no_held_out", action="store_true", help="calibration: in-sample fit only")
    parser.add_argument("--predict", nargs="+", metavar="RUN_OUTPUT",
                        help="calibration: also predict the rows of multihost/run.sh outputs (one invocation per "
                             "file, averaged) from the fit, before they join the tables")
    parser.add_argument("--project", action="store_true", help="ResNet-50 on H100 machines instead")
    parser.add_argument("--img_s", type=float, default=3000, help="--project: images/s per GPU (3000)")
    parser.add_argument("--batch", type=int, default=256, help="--project: images per GPU and step (256)")
    parser.add_argument("--nvlink_gbs", type=float, default=350, help="--project: NVLink GB/s per GPU (350)")
    parser.add_argument("--nvlink_alpha_us", type=float, default=5, help="--project: NVLink alpha, us (5)")
    parser.add_argument("--update_ms", type=float, default=1,
                        help="--project: parameter updates per step, ms (1: momentum SGD streams 25.6M fp32 "
                             "parameters, gradients and momenta, about 0.5 GB, plus a launch per tensor)")
    parser.add_argument("--net_alpha_us", type=float, default=10, help="--project: network alpha, us (10)")
    parser.add_argument("--call_us", type=float, default=20, help="--project: per-call overhead, us (20)")
    parser.add_argument("--overlap_pct", type=float, default=5,
                        help="--project: compute slowdown while a collective transfers, %% (5)")
    parser.add_argument("--cv_pct", type=float, default=1,
                        help="--project: coefficient of variation of a GPU's step time, %% (1)")
    args = parser.parse_args()
    if args.wire_ns is not None and (len(args.wire_ns) != 3 or min(args.wire_ns) < 0):
        parser.error("--wire_ns takes three non-negative numbers, NARROW,ADD,WIDEN")
    args.step_ms = 1e3 * args.batch / args.img_s
    try:
        prof = read_profile(args.trace, args.skip)
        shapes = read_shapes(args.checkpoint)
        missing = [p for p in prof["params"] if p not in shapes]
        if missing:
            raise ValueError(f"{args.checkpoint} lacks {missing[:3]}")
        (project if args.project else calibrate)(args, prof, shapes)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
