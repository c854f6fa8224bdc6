#!/usr/bin/python3
"""Step time, allreduce time per step and the share of it hidden behind other work, from a lockstep trace.

Reads the Chrome trace that LOCKSTEP_TRACE=<path> makes a training net write (<path>.train.json): complete
events ("ph": "X", "ts" and "dur" in microseconds, "tid" the thread, "name" the operator type). Steps start at
the ReadBatch events of the thread that runs the first ReadBatch (the first device's); a step runs until the
next one starts, the last one until the last event ends. The first --skip steps (warm-up) are left out.

Per measured step it reports
  step_s       the mean length of a step;
  allreduce_s  the summed duration of the Allreduce events that start in it;
  hidden       the share of that allreduce time during which some other, non-collective operator ran on
               another thread (backward of the layers below, or another device's work).

usage: trace_summary.py TRACE.json [--skip N] [--json]
"""

import argparse
import bisect
import json
import sys

COLLECTIVES = {"Allreduce", "Broadcast"}


def merge(intervals):
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def covered(start, end, merged):
    """Length of [start, end) covered by sorted, disjoint intervals."""
    total = 0.0
    i = max(0, bisect.bisect_right([m[0] for m in merged], start) - 1)
    for a, b in merged[i:]:
        if a >= end:
            break
        total += max(0.0, min(end, b) - max(start, a))
    return total


def summarize(events, skip):
    events = [e for e in events if e.get("ph") == "X"]
    reads = sorted((e for e in events if e["name"] == "ReadBatch"), key=lambda e: e["ts"])
    if not reads:
        raise ValueError("no ReadBatch events: not a training net's trace")
    first_thread = reads[0]["tid"]
    starts = [e["ts"] for e in reads if e["tid"] == first_thread]
    last_end = max(e["ts"] + e["dur"] for e in events)
    bounds = starts + [last_end]
    if len(starts) <= skip:
        raise ValueError(f"the trace has {len(starts)} steps, not more than --skip {skip}")
    begin = bounds[skip]
    steps = len(starts) - skip

    # Non-collective work per thread, merged.
    per_thread = {}
    for e in events:
        if e["name"] not in COLLECTIVES:
            per_thread.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    threads = sorted(per_thread)

    allreduce = hidden = 0.0
    count = 0
    others_of = {}  # thread -> merged non-collective work of the other threads
    for e in events:
        if e["name"] != "Allreduce" or e["ts"] < begin:
            continue
        count += 1
        allreduce += e["dur"]
        if e["tid"] not in others_of:
            others_of[e["tid"]] = merge(iv for t in threads if t != e["tid"] for iv in per_thread[t])
        hidden += covered(e["ts"], e["ts"] + e["dur"], others_of[e["tid"]])

    return {
        "steps": steps,
        "step_s": (last_end - begin) / steps / 1e6,
        "allreduce_s": allreduce / steps / 1e6,
        "allreduce_ops_per_step": count / steps,
        "hidden": hidden / allreduce if allreduce > 0 else None,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", help="a <path>.train.json that LOCKSTEP_TRACE=<path> wrote")
    parser.add_argument("--skip", type=int, default=1, help="warm-up steps to leave out (default 1)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a line")
    args = parser.parse_args()
    with open(args.trace) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    try:
        s = summarize(events, args.skip)
    except ValueError as e:
        print(f"error: {args.trace}: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(s))
    else:
        hidden = "n/a" if s["hidden"] is None else f"{100 * s['hidden']:.1f}%"
        print(f"steps {s['steps']}  step {s['step_s']:.4f} s  allreduce {s['allreduce_s']:.4f} s/step "
              f"({s['allreduce_ops_per_step']:.1f} ops)  hidden {hidden}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
