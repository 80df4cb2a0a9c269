#!/usr/bin/env bash
# Session 12 (b): one-token warp pipelines of at most one CTA per SM get 8 stages instead of 4
# (LAB FUSELM_LAB_DEEP=0 turns it off): skinny GEMM + fused decode tests, timelines, 1B latency A/B.
set -uo pipefail
C=$(cat .commit)
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_decode_timeline_test gpu_skinny_gemm_test gpu_fused_decode_test gpu_fused_engine_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
for t in skinny_gemm fused_decode fused_engine; do
  build-gpu/tests/gpu_${t}_test 2>&1 | grep -E "^\[  (PASSED|FAILED)|FAILED|tests ran" | head -8
done
echo "tests $((SECONDS-start)) s"
mkdir -p $OUT/tl
for a in 0 1; do
  FUSELM_LAB_DEEP=$a build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" > $OUT/tl/$C-deep$a.txt
  echo "== deep $a"; grep -v "us after" $OUT/tl/$C-deep$a.txt | grep " 1 " | awk '{print $2,$3,$4,$5,$7,$9,$10,$11,$15,$16}'
done
echo "timelines $((SECONDS-start)) s"
timeout 200 bash scripts/gpu-ab.sh llama-3.2-1b 3 d0:FUSELM_LAB_DEEP=0 d1:FUSELM_LAB_DEEP=1 -- --device cuda --dtype bf16 --scenario latency --reps 2 2>&1 | grep -v "^=="
echo "total $((SECONDS-start)) s"
