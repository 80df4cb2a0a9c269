#!/usr/bin/env bash
# The committed benchmarks, on a machine with an NVIDIA GPU, from the repository root, after
# scripts/gpu-check.sh built build-gpu (or with BUILD pointing at a build that has `fuselm`):
#   1. the bandwidth peaks and the copy-kernel check (`fuselm bench --peak`);
#   2. the default full sweep (`--scenario all`) for the Llama-3.1-8B and Llama-3.2-1B shapes on
#      the default (fused) path, each under a 300 s budget, and their plots;
#   3. `--compare baseline,fused` at batch 1 on both shapes (the fused issue's speedups);
#   4. the serving scenario on the 8B shape (Poisson arrivals at 4 requests/s, 64 requests);
#   5. a second 8B latency run for repeatability, and `fuselm tune` for the 8B shape.
# Results go to bench/results/ (RESULTS overrides); when OUT is set, everything is also packed
# into $OUT/bench-results.tar.gz. A table of the headline numbers is printed last.
# Usage: [FUSELM_COMMIT=<hash>] [BUILD=build-gpu] bash scripts/gpu-bench.sh
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build-gpu}
results=${RESULTS:-bench/results}
fuselm=$build/fuselm
export FUSELM_COMMIT=${FUSELM_COMMIT:-$(cat .commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)}
mkdir -p "$results/plots" "$results/logs"
[ -x "$fuselm" ] || { echo "gpu-bench: $fuselm not built; run scripts/gpu-check.sh first" >&2; exit 1; }
shapes=(llama-3.1-8b llama-3.2-1b)

run() {  # name, then the fuselm arguments; logs stderr, keeps going on failure
  local name=$1
  shift
  echo "== fuselm $*"
  local start=$SECONDS
  timeout "${FUSELM_TIMEOUT:-330}" "$fuselm" "$@" >"$results/logs/$name.txt" 2>"$results/logs/$name.err"
  local rc=$?
  echo "   exit $rc after $((SECONDS - start)) s"
  [ $rc -eq 0 ] || tail -5 "$results/logs/$name.err"
}

run peak bench --peak --json "$results/h200-peak.json"
for shape in "${shapes[@]}"; do
  run "$shape" bench -m "synthetic:$shape?vocab=32000" --device cuda --dtype bf16 --scenario all --time-budget 300 -q \
      --json "$results/h200-$shape.json" --markdown "$results/h200-$shape.md"
  bench/plot.sh "$results/h200-$shape.json" "$results/plots/h200-$shape" >/dev/null 2>&1 || echo "   plots failed"
  run "compare-$shape" bench -m "synthetic:$shape?vocab=32000" --device cuda --dtype bf16 --scenario latency \
      --compare baseline,fused --reps 3 -q --json "$results/h200-$shape-compare.json" \
      --markdown "$results/h200-$shape-compare.md"
done
run llama-3.1-8b-serving bench -m 'synthetic:llama-3.1-8b?vocab=32000' --device cuda --dtype bf16 --scenario serving \
    --request-rate 4 --num-prompts 64 -q --json "$results/h200-llama-3.1-8b-serving.json" \
    --markdown "$results/h200-llama-3.1-8b-serving.md"
run llama-3.1-8b-run2 bench -m 'synthetic:llama-3.1-8b?vocab=32000' --device cuda --dtype bf16 --scenario latency -q \
    --json "$results/h200-llama-3.1-8b-run2.json"
FUSELM_TIMEOUT=90 run tune-llama-3.1-8b tune -m 'synthetic:llama-3.1-8b?vocab=32000' --dtype bf16 -o "$results/h200-llama-3.1-8b-plan.json" -q

if [ -n "${OUT:-}" ]; then
  tar czf "$OUT/bench-results.tar.gz" -C "$results" . 2>/dev/null
fi

RESULTS="$results" python3 - <<'PY'
import json, os
r = os.environ["RESULTS"]


def load(name):
    try:
        with open(os.path.join(r, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def get(j, *path):
    for p in path:
        if j is None:
            return None
        j = j[p] if isinstance(j, dict) and p in j else (j[p] if isinstance(j, list) and isinstance(p, int) and p < len(j) else None)
    return j


print()
peak = load("h200-peak.json")
pb = get(peak, "peak_bandwidth") or get(peak, "environment", "peak_bandwidth") or {}
if pb:
    print(f"peak read {pb.get('read_gbs', float('nan')):.0f} GB/s, copy kernel {pb.get('copy_kernel_gbs', float('nan')):.0f} GB/s, "
          f"cudaMemcpy {pb.get('copy_gbs', float('nan')):.0f} GB/s, copy kernel / memcpy {pb.get('copy_kernel_vs_memcpy', float('nan')):.3f}")
print(f"{'shape':<14}{'decode tok/s':>13}{'BW util':>9}{'ITL p99/p50':>12}{'b16 tok/s':>11}{'prefill512 tok/s':>17}{'wall s':>8}"
      f"{'fused/baseline':>16}")
for shape in ("llama-3.1-8b", "llama-3.2-1b"):
    j = load(f"h200-{shape}.json")
    lat = get(j, "scenarios", "latency") or {}
    b16 = next((t for t in get(j, "scenarios", "throughput") or [] if t.get("batch") == 16), {})
    p512 = next((p for p in get(j, "scenarios", "prefill") or [] if p.get("tokens") == 512), {})
    itl = lat.get("itl_ms") or {}
    ratio = itl["p99"] / itl["p50"] if itl.get("p50") else float("nan")
    c = load(f"h200-{shape}-compare.json")
    speed = get(c, "compare", "speedup", "decode")
    if isinstance(speed, dict):
        speed = speed.get("median")
    wall = get(j, "timing", "wall_s")
    print(f"{shape:<14}{lat.get('decode_tok_s', float('nan')):>13.1f}{(get(lat, 'bandwidth', 'utilization') or float('nan')):>9.1%}"
          f"{ratio:>12.3f}{b16.get('output_tok_s', float('nan')):>11.0f}{p512.get('tok_s', float('nan')):>17.0f}"
          f"{(wall or float('nan')):>8.0f}{(speed or float('nan')):>15.3f}x")
a, b = load("h200-llama-3.1-8b.json"), load("h200-llama-3.1-8b-run2.json")
x, y = get(a, "scenarios", "latency", "decode_tok_s"), get(b, "scenarios", "latency", "decode_tok_s")
if x and y:
    print(f"repeatability (8B latency decode tok/s): {x:.1f} vs {y:.1f}, {abs(x - y) / max(x, y):.1%} apart")
PY
