#!/usr/bin/env bash
# Session 22 (d): decode attention's first items located once per step (decode_attention_locate,
# a small kernel before the embedding) instead of by every CTA at every layer. s22c's timeline: the
# 1B attention's last CTA located its first item 1.6 us after its start, had its block numbers 1.2 us
# later and its prologue issued 1.1 us after that, and was released only then (2.55 us after the QKV
# projection's end, against 0.6 for the first CTA); 8B: released 4.3 us after it.
# Prediction: the 1B attention's last CTA released ~1-1.5 us earlier, +1.5-3% at batch 1; 8B +0-1%.
# Tests first (attention, including the new LocatedFirstItemsGiveTheSameBits; the fused engine's
# bitwise tests), the timeline, then A/B against FUSELM_LAB_NO_LOCATE=1 (a lab switch of this build
# only) in turns.
set -uo pipefail
start=$SECONDS
bash scripts/gpu-build.sh fuselm gpu_attention_test gpu_fused_engine_test gpu_decode_timeline_test || exit 1
timeout 200 build-gpu/tests/gpu_attention_test --gtest_filter='AttentionDecode*:*Decode*' 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure|tests ran" -A3 | head -20
timeout 200 build-gpu/tests/gpu_fused_engine_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure|tests ran" -A3 | head -20
echo "tests $((SECONDS-start)) s"
timeout 120 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 |
    grep "^\[bench\]" > $OUT/s22d-timeline.txt
grep -v -e "us after" -e "CTAs an SM" $OUT/s22d-timeline.txt | awk '{print $2,$3,$4,$6,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17}' | head -24
echo "timeline $((SECONDS-start)) s"
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
timeout 150 bash scripts/gpu-ab.sh llama-3.2-1b 3 perlayer:FUSELM_LAB_NO_LOCATE=1 located -- $LAT 2>&1 | grep -v "^=="
timeout 150 bash scripts/gpu-ab.sh llama-3.1-8b 2 perlayer:FUSELM_LAB_NO_LOCATE=1 located -- $LAT 2>&1 | grep -v "^=="
mkdir -p $OUT/s22d && cp bench/results/dev/ab/*.json $OUT/s22d/ 2>/dev/null
(cd $OUT && tar czf s22d.tgz s22d && rm -rf s22d)
echo "total $((SECONDS-start)) s"
