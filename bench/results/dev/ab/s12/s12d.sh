#!/usr/bin/env bash
# Session 12 (d): the bound on what finer-grained dependencies could gain. LAB FUSELM_LAB_NOWAIT:
# 1 = every layer GEMM skips its wait before the activations (waits before its epilogue instead;
# wrong results, timing only), 2 = all but the O projection (GEMM -> GEMM boundaries only).
set -uo pipefail
C=$(cat .commit)
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_decode_timeline_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
mkdir -p $OUT/tl
for a in 0 2 1; do
  FUSELM_LAB_NOWAIT=$a build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" > $OUT/tl/$C-nowait$a.txt
  echo "== nowait $a"; grep -v "us after" $OUT/tl/$C-nowait$a.txt | awk '{print $2,$3,$4,$5,$6,$7,$9,$10,$11,$15,$16}'
done
echo "timelines $((SECONDS-start)) s"
for s in llama-3.2-1b llama-3.1-8b; do
  timeout 200 bash scripts/gpu-ab.sh $s 2 w0:FUSELM_LAB_NOWAIT=0 w2:FUSELM_LAB_NOWAIT=2 w1:FUSELM_LAB_NOWAIT=1 -- --device cuda --dtype bf16 --scenario latency --reps 2 2>&1 | grep -v "^=="
done
echo "total $((SECONDS-start)) s"
