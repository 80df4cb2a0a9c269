#!/usr/bin/env bash
# One GPU call that checks and measures what matters most first, within a device-time budget:
#   1. scripts/gpu-check.sh (build, every GPU test, the CLI; memcheck only while its budget lasts);
#   2. the decode attention lab (docs/kernels/attention.md), into bench/results/dev/attention-lab/,
#      and the fused decode step's kernel timeline, into bench/results/dev/decode-timeline/;
#   3. `--compare baseline,fused` latency on both synthetic shapes (the fused issue's headline);
#   4. the full default sweeps, each only if the time left (FUSELM_SESSION_BUDGET, default 540 s
#      from the start) covers its estimate.
# Results land in bench/results/ and, when OUT is set, in $OUT/session-results.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.."
budget=${FUSELM_SESSION_BUDGET:-540}
# The results name the commit measured (the copy of the tree on the GPU machine may carry a stale .git).
export FUSELM_COMMIT=${FUSELM_COMMIT:-$(cat .commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)}
results=bench/results
mkdir -p "$results/logs" "$results/plots"
FUSELM_GPU_CHECK_BUDGET=${FUSELM_GPU_CHECK_BUDGET:-0} bash scripts/gpu-check.sh 2>&1 | tail -25
fuselm=build-gpu/fuselm
left() { echo $((budget - SECONDS)); }
pack() { [ -n "${OUT:-}" ] && tar czf "$OUT/session-results.tar.gz" -C "$results" . 2>/dev/null; true; }
pack
# A kernel lab: a disabled GoogleTest whose [bench] lines land in bench/results/dev/DIR/COMMIT.txt.
# Usage: lab TITLE TEST-BINARY FILTER DIR TIMEOUT
lab() {
  local exe=build-gpu/tests/$2
  [ "$(left)" -gt 120 ] && [ -x "$exe" ] || return 0
  echo "== $1 ($(left) s left)"
  mkdir -p "$results/dev/$4"
  timeout "$5" "$exe" --gtest_also_run_disabled_tests --gtest_filter="$3" 2>&1 | grep "^\[bench\]" |
      tee "$results/dev/$4/$FUSELM_COMMIT.txt"
  pack
}
lab "decode attention lab" gpu_attention_test AttentionBench.DISABLED_Decode attention-lab 60
lab "decode step timeline" gpu_decode_timeline_test DecodeTimeline.DISABLED_Lab decode-timeline 90
for shape in llama-3.1-8b llama-3.2-1b; do
  [ "$(left)" -gt 60 ] || { echo "== compare $shape: skipped, $(left) s left"; continue; }
  echo "== compare $shape ($(left) s left)"
  timeout $(($(left) - 5)) "$fuselm" bench -m "synthetic:$shape?vocab=32000" --scenario latency --compare baseline,fused \
      --reps 3 -q --json "$results/h200-$shape-compare.json" --markdown "$results/h200-$shape-compare.md" 2>&1 | tail -16
  pack
done
for spec in llama-3.2-1b:80 llama-3.1-8b:230; do
  shape=${spec%%:*} need=${spec#*:}
  [ "$(left)" -gt "$need" ] || { echo "== sweep $shape: skipped, $(left) s left of the $need s it takes"; continue; }
  echo "== sweep $shape ($(left) s left)"
  timeout $(($(left) - 5)) "$fuselm" bench -m "synthetic:$shape?vocab=32000" --scenario all --time-budget 300 -q \
      --json "$results/h200-$shape.json" --markdown "$results/h200-$shape.md" 2>&1 | tail -40
  pack
done
