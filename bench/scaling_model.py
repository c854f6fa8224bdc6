#!/usr/bin/python3
"""Scaling model of a data-parallel lockstep step: compute from a 1-shard trace, bucketed allreduces alpha-beta.

One step on N shards is modelled as the 1-shard step's operators in their traced order (forward, backward,
update), with each gradient bucket's allreduce starting once its last gradient is written and the previous
allreduce has ended (one collective in flight, in bucket order). The step ends at
max(end of backward, end of the last allreduce) + the update. Buckets follow Parallelize: trainable
parameters in reverse creation order (the order of the traced MomentumSGDUpdate operators, reversed), each
slice 64-byte aligned, a bucket closing once it holds >= --bucket_mib MiB; shapes come from a checkpoint's
safetensors header (`train --save_model_name`).

An allreduce of b bytes on N shards costs steps(N) * alpha + factor(N) * b / B, per algorithm:
  ring              (N-1) alpha + (N-1) b/B   (Gloo's plain ring passes the whole buffer around)
  ring_chunked      2(N-1) alpha + 2(N-1)/N b/B
  halving_doubling  2 log2(N) alpha + 2(N-1)/N b/B for N a power of two; otherwise with P the largest power
                    of two below N, 2 log2(P) + 2 steps and 2(P-1)/P + 1 buffers (the extra ranks' full
                    buffers are folded into P ranks and the result sent back: about one more buffer)
  bcube             as halving_doubling (base 2 at N = 2 and 4, the shard counts it runs with here)

Calibrate mode (default) fits alpha and B per (algorithm, link) by least squares on the allreduce time per
step of bench/README.md's multihost table and prints predicted against measured step times. --project mode
predicts ResNet-50 on H100-class GPUs (8 per machine on NVLink) with a hierarchical allreduce.

usage: scaling_model.py --trace T.train.json --checkpoint M.safetensors [--readme bench/README.md]
       scaling_model.py --project --trace resnet50.train.json --checkpoint resnet50.safetensors
"""

import argparse
import json
import math
import os
import re
import statistics
import struct
import sys

ALGORITHMS = ("ring", "ring_chunked", "halving_doubling", "bcube")


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


def plan_buckets(params, shapes, bucket_bytes):
    """Parallelize's bucket plan: params reversed, 64-byte aligned float slices, close at >= bucket_bytes.

    Returns a list of (bytes, [params])."""
    buckets, names, size = [], [], 0
    for p in reversed(params):
        size = (size + 63) // 64 * 64 + 4 * math.prod(shapes[p])
        names.append(p)
        if size >= bucket_bytes:
            buckets.append((size, names))
            names, size = [], 0
    if names:
        buckets.append((size, names))
    return buckets


def cost_terms(algorithm, n):
    """(latency steps, buffer factor) of one allreduce on n shards: time = steps*alpha + factor*bytes/B."""
    if n <= 1:
        return 0.0, 0.0
    if algorithm == "ring":
        return n - 1, n - 1
    if algorithm == "ring_chunked":
        return 2 * (n - 1), 2 * (n - 1) / n
    p = 1 << (n.bit_length() - 1)  # halving_doubling, bcube
    if p == n:
        return 2 * math.log2(n), 2 * (n - 1) / n
    return 2 * math.log2(p) + 2, 2 * (p - 1) / p + 1


def simulate(buckets, ready, backward_end, update_s, comm, scale=1.0):
    """Step time: buckets' allreduces in order, each after its gradients and the previous one.

    ready(bucket) -> seconds; comm(bytes) -> seconds; scale stretches the compute. Returns (step, detail)."""
    end = 0.0
    tail = 0.0
    for size, names in buckets:
        start = max(end, scale * max(ready[p] for p in names))
        end = start + comm(size)
    compute_end = scale * backward_end
    tail = max(0.0, end - compute_end)
    return max(compute_end, end) + scale * update_s, tail


def fit_alpha_beta(points, fit_alpha):
    """Least squares of y = s*alpha + fx/B on points (s, fx, y) with fx = factor*bytes, alpha >= 0
    (alpha = 0 unless fit_alpha). Returns (alpha seconds, B bytes/second)."""
    sss = sum(s * s for s, _, _ in points)
    sff = sum(f * f for _, f, _ in points)
    ssf = sum(s * f for s, f, _ in points)
    ssy = sum(s * y for s, _, y in points)
    sfy = sum(f * y for _, f, y in points)
    det = sss * sff - ssf * ssf
    alpha, inv_b = ((sff * ssy - ssf * sfy) / det, (sss * sfy - ssf * ssy) / det) if det > 1e-30 else (-1, 0)
    if alpha < 0 or not fit_alpha:
        alpha, inv_b = 0.0, sfy / sff
    if inv_b <= 0:  # no bandwidth term fits: latency only
        alpha, inv_b = ssy / sss, 1e-30
    return alpha, 1 / inv_b


def read_table(readme):
    """Rows of bench/README.md's multihost table (its section only): (shards, gbit, algorithm, step_s, allreduce_s) as means
    of the invocations."""
    text = open(readme).read()
    text = text[text.index("## Shards over shaped links"):]
    text = text[: text.index("\n## ")]  # that section only
    rows = []
    for m in re.finditer(r"^\| (\d+) \| ([\d.]+) \| (\w+) \| ([\d. /]+) \| ([\d. /]+) \|", text, re.M):
        mean = lambda s: statistics.mean(float(x) for x in s.split("/"))
        rows.append((int(m.group(1)), float(m.group(2)), m.group(3), mean(m.group(4)), mean(m.group(5))))
    return rows


def calibrate(args, prof, shapes):
    """Fits alpha, B per (algorithm, link) and prints predicted vs measured step times."""
    buckets = plan_buckets(prof["params"], shapes, args.bucket_mib * 2**20)
    total = sum(b for b, _ in buckets)
    rows = read_table(args.readme)
    print(f"1-shard trace: step {prof['step_s']:.4f} s, backward ends {prof['backward_end']:.4f} s, update "
          f"{prof['update_s']:.4f} s; {len(prof['params'])} parameters, {total / 1e6:.1f} MB in "
          f"{len(buckets)} buckets of >= {args.bucket_mib} MiB\n")
    contention = lambda n: max(1.0, n / 2) if args.contention else 1.0
    copies = lambda n, g: contention(n) if g >= args.cpu_link_gbit else 1.0  # kernel copies, not the shaper
    fits = {}
    for key in sorted({(r[2], r[1]) for r in rows}):
        pts = []
        for n, g, a, _, ar in rows:
            if (a, g) == key:
                s, f = cost_terms(a, n)
                pts.append((s * len(buckets), f * total * copies(n, g), ar))
        fits[key] = fit_alpha_beta(pts, args.fit_alpha)
    print("fitted per (algorithm, link): alpha (latency per step) and effective bandwidth B")
    for (a, g), (alpha, b) in fits.items():
        bw = f"{b * 8 / 1e9:6.2f} Gbit/s" if b < 1e15 else "unbounded (latency only)"
        print(f"  {a:<17} {g:>4g} Gbit/s link: alpha {alpha * 1e3:7.3f} ms   B {bw}")
    print()
    c = "max(1, N/2)" if args.contention else "1"
    print(f"compute(N) = compute(1) * {c}; on links of >= {args.cpu_link_gbit:g} Gbit/s (veth copies on the same "
          f"cores limit, not the shaper) bytes/B is also multiplied by {c}\n")
    print("| shards | Gbit/s | algorithm | allreduce s meas / model | step s measured | step s model | error |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    within = []
    for n, g, a, step, ar in rows:
        alpha, b = fits[(a, g)]
        s, f = cost_terms(a, n)
        comm = lambda size: s * alpha + f * size * copies(n, g) / b
        pred, _ = simulate(buckets, prof["grad_ready"], prof["backward_end"], prof["update_s"], comm,
                           contention(n))
        err = (pred - step) / step
        within.append(abs(err) <= 0.10)
        model_ar = sum(comm(size) for size, _ in buckets)
        print(f"| {n} | {g:g} | {a} | {ar:.3f} / {model_ar:.3f} | {step:.3f} | {pred:.3f} | {100 * err:+.0f}% |")
    print(f"\n{sum(within)} of {len(within)} configurations within 10%.")


def project(args, prof, shapes):
    """ResNet-50 on 8-GPU H100 machines: efficiency per machine count and network bandwidth."""
    scale = args.step_ms / 1e3 / prof["step_s"]  # the CPU profile stretched to the GPU step
    print(f"assumed: {args.img_s:g} img/s per GPU at batch {args.batch} (ResNet-50, mixed precision; assumed, "
          f"not cited) -> compute {args.step_ms:.1f} ms/step, the CPU trace's operator profile scaled by "
          f"{scale:.2e}; fp32 gradients; NVLink {args.nvlink_gbs:g} GB/s per GPU per direction, alpha "
          f"{args.nvlink_alpha_us:g} us; network alpha {args.net_alpha_us:g} us per step; the machine's "
          f"bandwidth shared by its 8 GPUs (8 inter-node rings of 1/8 of each bucket)\n")
    print(f"forward and backward end at {1e3 * scale * prof['backward_end']:.1f} ms of the {args.step_ms:.1f} ms step; "
          f"bucket size from {{2, 4, 8, 16, 32, 64}} MiB and inter-node algorithm chosen per row for the "
          f"best efficiency = compute / step; no overlap: compute / (compute + allreduce)\n")
    print("| GPUs | Gbit/s | inter-node | bucket MiB | allreduce ms | exposed ms | step ms | efficiency | "
          "no overlap | limited by |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for gbit in (100, 200, 400):
        for gpus in (8, 16, 32, 64, 128, 256):
            machines = gpus // 8
            best = None
            for algorithm in ("ring_chunked", "halving_doubling"):
                for mib in (2, 4, 8, 16, 32, 64):
                    buckets = plan_buckets(prof["params"], shapes, mib * 2**20)
                    si, fi = 2 * 7, 2 * 7 / 8  # intra-node reduce-scatter + allgather over NVLink
                    sn, fn = cost_terms(algorithm, machines)
                    lat = si * args.nvlink_alpha_us * 1e-6 + sn * args.net_alpha_us * 1e-6
                    bw = lambda size: fi * size / (args.nvlink_gbs * 1e9) + fn * size / (gbit / 8 * 1e9)
                    comm = lambda size: lat + bw(size)
                    step, tail = simulate(buckets, prof["grad_ready"], prof["backward_end"], prof["update_s"],
                                          comm, scale)
                    eff = prof["step_s"] * scale / step
                    if best is None or eff > best[0]:
                        lat_total = lat * len(buckets)
                        bw_total = sum(bw(s) for s, _ in buckets)
                        last = comm(buckets[-1][0])
                        if tail <= last * 1.05:
                            limit = "exposed tail bucket"
                        else:
                            limit = "latency" if lat_total > bw_total else "bandwidth"
                        best = (eff, algorithm, mib, step, limit, lat_total + bw_total, tail)
            eff, algorithm, mib, step, limit, comm_s, tail = best
            print(f"| {gpus} | {gbit} | {algorithm if machines > 1 else '-'} | {mib} | {1e3 * comm_s:.1f} | "
                  f"{1e3 * tail:.2f} | {1e3 * step:.1f} | {100 * eff:.1f}% | "
                  f"{100 * args.step_ms / (args.step_ms + 1e3 * comm_s):.0f}% | {limit} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", required=True, help="1-shard <path>.train.json (LOCKSTEP_TRACE=<path>)")
    parser.add_argument("--checkpoint", required=True, help="the model's .safetensors (train --save_model_name)")
    parser.add_argument("--skip", type=int, default=5, help="warm-up steps of the trace to leave out (5)")
    parser.add_argument("--bucket_mib", type=float, default=8, help="bucket size of the calibration (8)")
    parser.add_argument("--readme", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "README.md"))
    parser.add_argument("--no_contention", dest="contention", action="store_false",
                        help="calibration: no compute(N) = compute(1) * max(1, N/2) for 2 shared cores")
    parser.add_argument("--fit_alpha", action="store_true",
                        help="calibration: fit alpha too (default 0: the links add no latency; 2 to 3 points "
                             "per fit overfit two parameters)")
    parser.add_argument("--cpu_link_gbit", type=float, default=10,
                        help="calibration: links this fast are limited by CPU copies, so contend too (10)")
    parser.add_argument("--project", action="store_true", help="ResNet-50 on H100 machines instead")
    parser.add_argument("--img_s", type=float, default=3000, help="--project: images/s per GPU (3000)")
    parser.add_argument("--batch", type=int, default=256, help="--project: images per GPU and step (256)")
    parser.add_argument("--nvlink_gbs", type=float, default=350, help="--project: NVLink GB/s per direction")
    parser.add_argument("--nvlink_alpha_us", type=float, default=5, help="--project: NVLink alpha, us (5)")
    parser.add_argument("--net_alpha_us", type=float, default=10, help="--project: network alpha, us (10)")
    args = parser.parse_args()
    args.step_ms = 1e3 * args.batch / args.img_s
    prof = read_profile(args.trace, args.skip)
    shapes = read_shapes(args.checkpoint)
    missing = [p for p in prof["params"] if p not in shapes]
    if missing:
        print(f"error: {args.checkpoint} lacks {missing[:3]}", file=sys.stderr)
        return 1
    (project if args.project else calibrate)(args, prof, shapes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
