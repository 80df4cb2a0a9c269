#!/usr/bin/env python3
"""Summarises an ncu CSV (gpu__time_duration.sum) of `fuselm generate` to the last decode step:
the kernels from the last fused embedding launch to the end, grouped by kernel name."""
import csv
import re
import sys
from collections import OrderedDict

rows = []
with open(sys.argv[1], newline="") as f:
    lines = [l for l in f if l.startswith('"')]  # ncu prints its own log lines too
for r in csv.DictReader(lines):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    ns = float(r["Metric Value"].replace(",", ""))
    if r.get("Metric Unit") in ("usecond", "us"):
        ns *= 1e3
    elif r.get("Metric Unit") in ("msecond", "ms"):
        ns *= 1e6
    rows.append((r["Kernel Name"], r.get("Grid Size", ""), r.get("Block Size", ""), ns))

starts = [i for i, r in enumerate(rows) if "fused_embed" in r[0]]
if len(starts) < 2:
    sys.exit(f"found {len(starts)} fused embedding launches; need two decode steps")
# The last step: from the last embedding to the next sampling kernel (or the end).
step = rows[starts[-1]:]


def short(name):
    name = re.sub(r"\(.*", "", name)        # arguments
    name = re.sub(r"^void ", "", name)
    name = re.sub(r"fuselm::(\(anonymous namespace\)::)?", "", name)
    return name[:70]


groups = OrderedDict()
for name, grid, block, ns in step:
    key = (short(name), grid, block)
    n, t = groups.get(key, (0, 0.0))
    groups[key] = (n + 1, t + ns)
total = sum(ns for *_, ns in step)
print(f"{'kernel':70} {'grid':>16} {'block':>12} {'n':>4} {'total us':>10} {'mean us':>9} {'share':>6}")
for (name, grid, block), (n, t) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
    print(f"{name:70} {grid:>16} {block:>12} {n:4d} {t / 1e3:10.1f} {t / n / 1e3:9.2f} {t / total:6.1%}")
print(f"{'step (kernels one at a time, no overlap)':70} {'':>16} {'':>12} {len(step):4d} {total / 1e3:10.1f}")
