#!/usr/bin/env bash
# What batch invariance costs in decode throughput (issue: deterministic inference). Invariance
# means one rounding class of GEMM variants per matrix and one attention split for every batch
# size; an engine without it would run, at each batch size, what is fastest at that size. The plan
# files under bench/results/invariance/ stand for such choices (the fastest at batch 1 and at 16
# from the `fuselm tune` timings, the old k1 default, 128-token splits; that folder's README says
# which is which); the default rule plan is the invariant engine.
# Runs `fuselm bench --scenario throughput` (decode tok/s column) with each; builds `fuselm` first.
# Usage: bash scripts/gpu-invariance-cost.sh   (writes bench/results/invariance/*.json, and $OUT)
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
export FUSELM_COMMIT=${FUSELM_COMMIT:-$(cat .commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)}
build=build-gpu
out=bench/results/invariance
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real >/dev/null 2>&1 &&
  cmake --build "$build" -j "$(nproc)" --target fuselm >"$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 1; }
model='synthetic:llama-3.1-8b?vocab=32000'
run() {  # name, batches, extra arguments
  local name=$1 batches=$2
  shift 2
  echo "== $name (batches $batches) $*"
  "$build/fuselm" bench -m "$model" --scenario throughput --batches "$batches" --reps 3 --no-peak -q \
      --json "$out/h200-llama-3.1-8b-$name.json" "$@" 2>&1 | grep -E "^ +(batch|[0-9]+ )"
  [ -n "${OUT:-}" ] && cp "$out/h200-llama-3.1-8b-$name.json" "$OUT/"
}
run invariant 1,16,64
# The rule plan before one-token variants: gate_up and the LM head on rt1_w4_cta at every m.
run k1-gate-up 1,16,64 --plan "$out/plan-k1-gate-up.json"
# The rule plan with 128-token decode splits: what a split following the sequence length would give.
run split128 1,16,64 --plan "$out/plan-split128.json"
run fastest-at-batch1 1 --plan "$out/plan-fastest-at-batch1.json"
run fastest-at-batch16 16,64 --plan "$out/plan-fastest-at-batch16.json"
run invariant-again 1,16,64
