#!/usr/bin/env python3
"""Where a fused decode step's time goes, from an Nsight Systems kernel trace.

Input: the CSV of `nsys stats -r cuda_gpu_trace -f csv` over a `fuselm generate` run on the fused
path (graph nodes traced one by one: `nsys profile --cuda-graph-trace=node`). A step starts at each
embedding kernel; the median of the last steps is reported. Kernels overlap under programmatic
dependent launch, so a kernel's share of the step is the time from the previous kernel's end to its
own end (`critical`): the shares add up to the step. `duration` includes time spent resident but
waiting for the previous kernel; `overlap` is how long it ran next to the previous kernel.
Usage: step_timeline.py TRACE.csv [STEPS]
"""
import csv
import statistics
import sys


def kind(name, previous_kind):
    n = name.lower()
    if "fused_embed" in n:
        return "embedding"
    if "decode_split" in n or "attention" in n:
        return "attention"
    if "skinny" in n:
        if "qkv" in n or "rope" in n:
            return "qkv"
        if "swiglu" in n:
            return "gate_up"
        if "residual" in n:
            return "o" if previous_kind == "attention" else "down"
        return "lm_head"
    if "sample" in n:
        return "sampling"
    return name.split("(")[0].split("<")[0][-40:]


def main():
    path = sys.argv[1]
    keep = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    rows = []
    with open(path, newline="") as f:
        lines = [l for l in f if l.strip() and not l.startswith("Processing") and not l.startswith("NOTICE")]
    reader = csv.DictReader(lines)
    for r in reader:
        name = r.get("Name", "")
        try:
            start = float(r["Start (ns)"])
            dur = float(r["Duration (ns)"])
        except (KeyError, ValueError):
            continue
        if r.get("GrdX", "") in ("", None) and "memcpy" in name.lower():
            continue
        if "[CUDA mem" in name:
            continue
        rows.append((start, start + dur, name))
    rows.sort()
    steps, current = [], None
    for start, end, name in rows:
        if "fused_embed" in name.lower():
            current = []
            steps.append(current)
        if current is not None:
            current.append((start, end, name))
    steps = [s for s in steps if len(s) > 10][-keep:]
    if not steps:
        print("no decode steps found (no embedding kernel in the trace)")
        return
    per_kind = {}
    spans, periods = [], []
    for i, s in enumerate(steps):
        spans.append(max(e for _, e, _ in s) - s[0][0])
        if i + 1 < len(steps):
            periods.append(steps[i + 1][0][0] - s[0][0])
        prev_end, prev_kind = s[0][0], None
        for start, end, name in s:
            k = kind(name, prev_kind)
            d = per_kind.setdefault(k, {"critical": [], "duration": [], "overlap": [], "count": 0})
            d["critical"].append(max(0.0, end - prev_end))
            d["duration"].append(end - start)
            d["overlap"].append(max(0.0, prev_end - start))
            d["count"] += 1
            prev_end, prev_kind = max(prev_end, end), k
    n = len(steps)
    step = statistics.median(spans)
    period = statistics.median(periods) if periods else step
    print(f"{n} steps: median span (first kernel start to last kernel end) {step / 1000:.1f} us, "
          f"median period (start to next start) {period / 1000:.1f} us: {(period - step) / 1000:.1f} us idle between")
    print(f"{'kernel':<12} {'per step':>8} {'critical us/step':>17} {'share':>6} {'mean dur us':>12} {'mean overlap us':>16}")
    for k, d in sorted(per_kind.items(), key=lambda kv: -sum(kv[1]["critical"])):
        crit = sum(d["critical"]) / n
        print(f"{k:<12} {d['count'] / n:>8.0f} {crit / 1000:>17.1f} {crit / step:>6.1%} "
              f"{statistics.mean(d['duration']) / 1000:>12.2f} {statistics.mean(d['overlap']) / 1000:>16.2f}")


if __name__ == "__main__":
    main()
