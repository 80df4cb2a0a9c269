#!/usr/bin/env bash
# Session 22 (b): the one-launch FFN with each warp's ring stages moved by bulk copies (lane 0, one
# copy a stage, an mbarrier a stage) instead of 16-byte cp.async a lane. s22a's stamps put its
# 3.0-3.5 TB/s at the SM: loads issued after the weight prologue (4 KB of x from L2) landed ~5 us
# later, behind the ring's ~112 KB an SM; two CTAs an SM did not lift the 1B rate (32.5 us).
# Prediction: bulk copies stream the 1B FFN alone at >= 3.9 TB/s (~26-27 us against 30.5 for the
# two launches), and the x stage lands within ~1 us.
# Then in the step (FUSELM_LAB_FFN_BULK, a lab switch of this build only): 1B and 8B batch 1,
# the two launches against the one launch with cp.async and with bulk copies.
set -uo pipefail
start=$SECONDS
bash scripts/gpu-build.sh fuselm gpu_skinny_ffn_test gpu_fused_engine_test || exit 1
timeout 120 build-gpu/tests/gpu_skinny_ffn_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -20
echo "tests $((SECONDS-start)) s"
timeout 200 build-gpu/tests/gpu_skinny_ffn_test --gtest_also_run_disabled_tests --gtest_filter='*DISABLED_Lab' 2>&1 | grep -E "\[bench\]|Failure" -A2 | grep -v "down ready, warp [1-7]"
echo "lab $((SECONDS-start)) s"
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
F=plan:decode.ffn_one_launch_tokens=1
timeout 150 bash scripts/gpu-ab.sh llama-3.2-1b 2 rules one:$F bulk:$F,FUSELM_LAB_FFN_BULK=1 -- $LAT 2>&1 | grep -v "^=="
timeout 120 bash scripts/gpu-ab.sh llama-3.1-8b 1 rules one:$F bulk:$F,FUSELM_LAB_FFN_BULK=1 -- $LAT 2>&1 | grep -v "^=="
FUSELM_LAB_FFN_BULK=1 timeout 120 build-gpu/tests/gpu_fused_engine_test --gtest_filter='*OneLaunch*' 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -10
mkdir -p $OUT/s22b && cp bench/results/dev/ab/*.json $OUT/s22b/ 2>/dev/null
(cd $OUT && tar czf s22b.tgz s22b && rm -rf s22b)
echo "total $((SECONDS-start)) s"
