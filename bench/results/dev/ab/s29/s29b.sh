#!/usr/bin/env bash
# Session 29, second call: decode attention asks L2 for the first 16 or 32 MiB of the layer's gate/up
# weights once its keys are in (plan decode.attention_l2_warm_tokens / _kib; the same build, arms by
# plan edits): the bits test, then batch-1 A/B on both shapes.
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s29/s29b.sh
set -uo pipefail
start=$SECONDS
export FUSELM_COMMIT=$(cat .commit 2>/dev/null || echo unknown)
bash scripts/gpu-build.sh fuselm gpu_fused_engine_test || exit 1
timeout 120 build-gpu/tests/gpu_fused_engine_test --gtest_filter='*L2Warm*' 2>&1 |
    grep -E "^\[  (FAILED|PASSED) |^\[       OK|Failure" -A3 | head -12
echo "build and test $((SECONDS - start)) s"
rm -f bench/results/dev/ab/*.json
warm() { echo "w$1:plan:decode.attention_l2_warm_tokens=1,plan:decode.attention_l2_warm_kib=$(($1 * 1024))"; }
timeout 240 bash scripts/gpu-ab.sh llama-3.2-1b 3 base "$(warm 16)" "$(warm 32)" -- --device cuda --dtype bf16 \
    --scenario latency --reps 2
echo "1B $((SECONDS - start)) s"
timeout 150 bash scripts/gpu-ab.sh llama-3.1-8b 2 base "$(warm 32)" -- --device cuda --dtype bf16 \
    --scenario latency --reps 2
echo "total $((SECONDS - start)) s"
mkdir -p "$OUT/ab" && cp bench/results/dev/ab/*.json "$OUT/ab/" 2>/dev/null
(cd "$OUT" && tar czf ab.tgz ab && rm -rf ab)
