#!/usr/bin/env bash
# Session 30, second call: the fold with the next kernel launched only once the fold CTAs have their
# head group's output (fold-late-trigger.patch) against the fold as committed, by plan edit, 1B batch 1.
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s30/s30b.sh
set -uo pipefail
AB_TESTS=fused_engine AB_TEST_FILTER="fused_engine:*OProjection*" OUT=$OUT bash scripts/gpu-ab-patch.sh late=bench/results/dev/ab/s30/fold-late-trigger.patch -- llama-3.2-1b:1 2>&1 | grep -E "PASSED|FAILED|Failure|builds" | head
bash scripts/gpu-build.sh fuselm gpu_fused_engine_test > /dev/null 2>&1
rm -f bench/results/dev/ab/*.json
cp /tmp/fuselm-late /tmp/fl
timeout 200 bash scripts/gpu-ab.sh llama-3.2-1b 3 base fold:plan:decode.o_in_attention=true \
    late:AB_BIN=/tmp/fl,plan:decode.o_in_attention=true -- --device cuda --dtype bf16 --scenario latency --reps 2
mkdir -p "$OUT/ab" && cp bench/results/dev/ab/*.json "$OUT/ab/" 2>/dev/null
(cd "$OUT" && tar czf ab.tgz ab && rm -rf ab)
