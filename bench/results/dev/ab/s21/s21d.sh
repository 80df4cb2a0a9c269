#!/usr/bin/env bash
# Session 21 (d): s21c: the one-launch FFN took 31.7 us a 1B layer (last CTA end after the O
# projection's), the two launches ~31.5 (9118ce7), and the bench still ran 5% slower (1,195 against
# 1,259). Its gate/up phase streamed at ~2.9 TB/s, the down phase at ~4.2. Suspect: each job ended
# in a CTA-wide barrier, so every warp waited for the slowest epilogue, and the gate/up finishers
# each fenced from every lane (their rings ran dry meanwhile). Now: a row tile's warps meet on a
# named barrier of their own, one fence a tile from one lane, and a 12-stage ring where it fits
# (1B, one token: 24 KB a warp). Prediction: the 1B FFN at ~27 us, +4% over the rules. The rules'
# timeline beside it, same build.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_skinny_ffn_test gpu_decode_timeline_test gpu_fused_engine_test > /tmp/b.log 2>&1 || { grep -E "error" -A3 /tmp/b.log | head -40; exit 1; }
echo "build $((SECONDS-start)) s"
timeout 120 build-gpu/tests/gpu_skinny_ffn_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" | head -10
timeout 120 build-gpu/tests/gpu_fused_engine_test --gtest_filter='*OneLaunch*' 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" | head -10
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
F=plan:decode.ffn_one_launch_tokens
timeout 120 bash scripts/gpu-ab.sh llama-3.2-1b 2 rules ffn1:$F=1 -- $LAT 2>&1 | grep -v "^=="
for arm in rules ffn1; do
  FUSELM_TIMELINE_SHAPE=llama-3.2-1b FUSELM_TIMELINE_PLAN=bench/results/dev/ab/llama-3.2-1b-$arm.plan.json timeout 100 \
    build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*DISABLED_Lab' 2>&1 | grep "\[bench\] llama-3.2-1b      1 "
done
mkdir -p $OUT/s21d && tar czf $OUT/s21d/ab.tar.gz bench/results/dev/ab/*.json 2>/dev/null
echo "total $((SECONDS-start)) s"
