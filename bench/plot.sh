#!/usr/bin/env bash
# Renders PNG plots from a `fuselm bench --json` result:
#   itl.png         inter-token latency distribution (histogram) of the latency scenario
#   itl_cdf.png     the same as a cumulative distribution, with p50/p90/p99 marked
#   throughput.png  output tokens/s against batch size
#   prefill.png     prefill TFLOP/s and tokens/s against prompt length
#   depth.png       decode tokens/s against KV depth
#   stability.png   every decode step of the first timed repetition of the stability scenario
#                   (batch-1 ITL and the step at each batch), over its median
#   serving.png     cumulative distributions of TTFT, TPOT, ITL and E2E latency of the serving scenario
# Plots are made only for the scenarios the result holds; with --compare, one series per variant.
# Data is pulled from the JSON by python3 (standard library only) and drawn by gnuplot.
# Usage: bench/plot.sh RESULT.json OUTDIR
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 RESULT.json OUTDIR" >&2
  exit 2
fi
json=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot not found; install gnuplot-nox (scripts/setup-deps.sh does)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "plot.sh: python3 not found" >&2; exit 1; }
[ -f "$json" ] || { echo "plot.sh: '$json' does not exist; write one with fuselm bench --json FILE" >&2; exit 1; }
mkdir -p "$out"
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT

# Writes one .dat file per (plot, variant) into $data and prints shell assignments for the plots.
python3 - "$json" "$data" > "$data/vars.sh" <<'PY'
import json, math, shlex, sys

path, outdir = sys.argv[1], sys.argv[2]
with open(path) as f:
    r = json.load(f)
if "scenarios" not in r:
    sys.exit(f"plot.sh: {path} holds no benchmark scenarios (a --peak result?)")

if "compare" in r:
    order = r["compare"]["order"]
    variants = [(name, r["compare"][name]["scenarios"]) for name in order]
else:
    variants = [(r.get("path", "run"), r["scenarios"])]

env = r.get("environment", {})
gpu = env.get("gpu") or {}
where = gpu.get("name") or env.get("host_cpu", r.get("device", ""))
title = f'{r["model"]["spec"]} | {r["device"]} {r.get("dtype", "")} | {where} | {env.get("commit", "")[:12]}'

def write(name, rows):
    with open(f"{outdir}/{name}", "w") as f:
        for row in rows:
            f.write(" ".join(repr(float(x)) if isinstance(x, float) else str(x) for x in row) + "\n")

def percentile(sorted_xs, p):  # the tool's definition: linear between closest ranks
    h = (len(sorted_xs) - 1) * p / 100
    lo = math.floor(h)
    if lo + 1 >= len(sorted_xs):
        return sorted_xs[-1]
    return sorted_xs[lo] + (h - lo) * (sorted_xs[lo + 1] - sorted_xs[lo])

have = {"latency": [], "throughput": [], "prefill": [], "depth": [], "stability": [], "serving": []}
itl_all = []
for name, s in variants:
    if "latency" in s:
        itl = sorted(x for rep in s["latency"]["samples"] for x in rep["itl_ms"])
        itl_all += itl
        n = len(itl)
        write(f"itlcdf_{name}.dat", [(x, (i + 1) / n) for i, x in enumerate(itl)])
        write(f"itlpct_{name}.dat", [(percentile(itl, p), p / 100) for p in (50, 90, 99)])
        have["latency"].append(name)
    if "throughput" in s:
        write(f"throughput_{name}.dat",
              [(p["batch"], p["output_tok_s"], p["total_tok_s"], p["decode_tok_s"]) for p in s["throughput"]])
        have["throughput"].append(name)
    if "prefill" in s:
        write(f"prefill_{name}.dat", [(p["tokens"], p["tflops"], p["tok_s"]) for p in s["prefill"]])
        have["prefill"].append(name)
    if "depth" in s:
        write(f"depth_{name}.dat", [(p["depth"], p["decode_tok_s"], p["step_ms_median"]) for p in s["depth"]])
        have["depth"].append(name)
    if "stability" in s:
        # One file per series, named by number; the titles (no spaces) go to gnuplot as a word list.
        st = s["stability"]
        series = [("ITL-b1", st["itl"]["samples"][0]["itl_ms"], st["itl"]["itl_ms"]["p50"])]
        series += [(f'step-b{b["batch"]}', b["samples"][0]["step_ms"], b["step_ms"]["p50"]) for b in st["steps"]]
        for tag, xs, p50 in series:
            have["stability"].append(f"{name}:{tag}" if len(variants) > 1 else tag)
            write(f"stab_{len(have['stability'])}.dat", [(i + 1, x / p50) for i, x in enumerate(xs)])

    if "serving" in s:
        # Cumulative distributions over requests (TTFT, TPOT, E2E) and over token gaps (ITL).
        reqs = s["serving"]["samples"]
        for metric, xs in (("ttft", [q["ttft_ms"] for q in reqs]),
                           ("tpot", [q["tpot_ms"] for q in reqs if q["output_tokens"] > 1]),
                           ("itl", [x for q in reqs for x in q["itl_ms"]]),
                           ("e2e", [q["e2e_ms"] for q in reqs])):
            xs = sorted(xs)
            write(f"serv{metric}_{name}.dat", [(x, (i + 1) / len(xs)) for i, x in enumerate(xs)] or [(0, 0)])
        have["serving"].append(name)

# One set of histogram bins for every variant so their bars line up: 40 bins over [min, max].
if itl_all:
    lo, hi = min(itl_all), max(itl_all)
    width = (hi - lo) / 40 if hi > lo else max(lo * 0.01, 1e-6)
    for name, s in variants:
        if "latency" not in s:
            continue
        itl = [x for rep in s["latency"]["samples"] for x in rep["itl_ms"]]
        counts = [0] * 41
        for x in itl:
            counts[min(int((x - lo) / width), 40)] += 1
        write(f"itlhist_{name}.dat", [(lo + (i + 0.5) * width, c / len(itl)) for i, c in enumerate(counts)])
    print(f"binwidth={width!r}")

print(f"title={shlex.quote(title)}")
for k, names in have.items():
    print(f"{k}_variants={shlex.quote(' '.join(names))}")
PY
# shellcheck disable=SC1091
. "$data/vars.sh"

plot() {  # plot SCRIPT.gp VARIANTS
  gnuplot -e "datadir='$data'; outdir='$out'; variants='$2'; plottitle='${title//\'/}'; binwidth=${binwidth:-1}" "$here/$1"
}
made=()
if [ -n "$latency_variants" ]; then plot itl.gp "$latency_variants"; made+=(itl.png itl_cdf.png); fi
if [ -n "$throughput_variants" ]; then plot throughput.gp "$throughput_variants"; made+=(throughput.png); fi
if [ -n "$prefill_variants" ]; then plot prefill.gp "$prefill_variants"; made+=(prefill.png); fi
if [ -n "$depth_variants" ]; then plot depth.gp "$depth_variants"; made+=(depth.png); fi
if [ -n "$stability_variants" ]; then plot stability.gp "$stability_variants"; made+=(stability.png); fi
if [ -n "$serving_variants" ]; then plot serving.gp "$serving_variants"; made+=(serving.png); fi
[ ${#made[@]} -gt 0 ] || { echo "plot.sh: $json holds no scenario to plot" >&2; exit 1; }
echo "plot.sh: wrote ${made[*]} to $out"
