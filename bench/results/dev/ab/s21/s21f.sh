#!/usr/bin/env bash
# Session 21 (f): the last commit's GPU tests that its changes touch: the one-launch FFN at its new
# default ring (8 stages) and the decode timeline's ordered-record check (which now allows a step
# without a down slot).
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target gpu_skinny_ffn_test gpu_decode_timeline_test gpu_fused_engine_test > /tmp/b.log 2>&1 || { grep -E "error" -A3 /tmp/b.log | head -40; exit 1; }
echo "build $((SECONDS-start)) s"
for t in skinny_ffn decode_timeline; do
  timeout 100 build-gpu/tests/gpu_${t}_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -10
done
timeout 100 build-gpu/tests/gpu_fused_engine_test --gtest_filter='*OneLaunch*' 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" | head
echo "total $((SECONDS-start)) s"
