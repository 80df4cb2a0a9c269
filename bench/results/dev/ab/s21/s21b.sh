#!/usr/bin/env bash
# Session 21 (b): the decode FFN in one persistent launch (kernels/cuda/skinny_ffn.h: gate/up +
# SwiGLU and down + residual, a down piece waiting only for the gate/up tiles that make its
# activations, its weights in flight before). First its tests (bitwise against the two launches),
# then the bench with plan:decode.ffn_one_launch_tokens=1 (batch 1) against the rules (two launches).
# Bytes per layer: 1B 100.7 MB (24.0 us at 4.2 TB/s), 8B 352 MB (83.9 us). Timeline at 9118ce7:
# 1B gate/up 19.12 + down 12.42 = 31.5 us, 8B 55.15 + 30.33 = 85.5 us.
# Prediction: 1B ~27-28 us a layer (-3.5 to -4.5: one ramp and one tail fewer, the down weights
# streaming during the gate/up tail), +6-8% tok/s; 8B -1.5 to -2 us a layer, +1.5%.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_skinny_ffn_test gpu_fused_engine_test > /tmp/b.log 2>&1 || { grep -E "error" -A3 /tmp/b.log | head -40; exit 1; }
echo "build $((SECONDS-start)) s"
timeout 120 build-gpu/tests/gpu_skinny_ffn_test 2>&1 | grep -E "^\[  (FAILED|PASSED|     OK) |Failure|Expected|Which is|rep |ctas" | head -30
timeout 200 build-gpu/tests/gpu_fused_engine_test --gtest_filter='*OneLaunch*:*BatchInvariant*' 2>&1 | grep -E "^\[  (FAILED|PASSED|     OK) |Failure|first differing" -A2 | head -20
echo "tests $((SECONDS-start)) s"
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
F=plan:decode.ffn_one_launch_tokens
timeout 150 bash scripts/gpu-ab.sh llama-3.2-1b 3 rules ffn1:$F=1 -- $LAT 2>&1 | grep -v "^=="
timeout 150 bash scripts/gpu-ab.sh llama-3.1-8b 2 rules ffn1:$F=1 -- $LAT 2>&1 | grep -v "^=="
mkdir -p $OUT/s21b && tar czf $OUT/s21b/ab.tar.gz bench/results/dev/ab/*.json 2>/dev/null
echo "total $((SECONDS-start)) s"
