#!/usr/bin/env bash
# Session 21 (c): s21b measured the one-launch FFN at ~2.55 TB/s on both shapes (1B 1,091 against
# 1,260 tok/s, 8B 181 against 262): a throughput limit, not a wait. Suspect: the issue loop computed
# each k-tile's address with mma_tile_index, two 64-bit divisions by the tile group per k-tile
# (~800 instructions per 2 KB stage and warp). Now one division per item, then additions.
# Prediction: near the two launches' K-loop rate; the A/B decides. Then the 1B timeline with it.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_skinny_ffn_test gpu_decode_timeline_test > /tmp/b.log 2>&1 || { grep -E "error" -A3 /tmp/b.log | head -40; exit 1; }
echo "build $((SECONDS-start)) s"
timeout 120 build-gpu/tests/gpu_skinny_ffn_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" | head -10
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
F=plan:decode.ffn_one_launch_tokens
timeout 120 bash scripts/gpu-ab.sh llama-3.2-1b 2 rules ffn1:$F=1 -- $LAT 2>&1 | grep -v "^=="
timeout 120 bash scripts/gpu-ab.sh llama-3.1-8b 2 rules ffn1:$F=1 -- $LAT 2>&1 | grep -v "^=="
FUSELM_TIMELINE_SHAPE=llama-3.2-1b FUSELM_TIMELINE_PLAN=bench/results/dev/ab/llama-3.2-1b-ffn1.plan.json timeout 120 \
  build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*DISABLED_Lab' 2>&1 | grep "\[bench\]" | grep -v "CTAs an SM"
mkdir -p $OUT/s21c && tar czf $OUT/s21c/ab.tar.gz bench/results/dev/ab/*.json 2>/dev/null
echo "total $((SECONDS-start)) s"
