#!/usr/bin/env bash
# Session 30, first call: the O projection inside decode attention's launch (plan decode.o_in_attention,
# one-sequence steps; the same build, arms by plan edit): its bits test and the engine's other fused
# tests, then batch-1 A/B on the 1B shape (the 8B shape's slices do not fit: no fold there).
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s30/s30a.sh
set -uo pipefail
start=$SECONDS
export FUSELM_COMMIT=$(cat .commit 2>/dev/null || echo unknown)
bash scripts/gpu-build.sh fuselm gpu_fused_engine_test || exit 1
timeout 200 build-gpu/tests/gpu_fused_engine_test 2>&1 |
    grep -E "^\[  (FAILED|PASSED) |^\[       OK|Failure|SKIPPED" -A3 | head -30
echo "build and test $((SECONDS - start)) s"
rm -f bench/results/dev/ab/*.json
timeout 200 bash scripts/gpu-ab.sh llama-3.2-1b 3 base fold:plan:decode.o_in_attention=true -- --device cuda \
    --dtype bf16 --scenario latency --reps 2
echo "total $((SECONDS - start)) s"
mkdir -p "$OUT/ab" && cp bench/results/dev/ab/*.json "$OUT/ab/" 2>/dev/null
(cd "$OUT" && tar czf ab.tgz ab && rm -rf ab)
