#!/usr/bin/env bash
# Session 12 (f): decode attention announces each (row, head group) of its output and the O
# projection waits for those flags instead of attention's grid. Tests, then timeline and latency
# A/B against LAB FUSELM_LAB_NOFLAGS=1 (the grid wait as before), batch 16 too.
set -uo pipefail
C=$(cat .commit)
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_decode_timeline_test gpu_fused_decode_test gpu_fused_engine_test gpu_golden_gpu_test gpu_attention_test gpu_skinny_gemm_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
for t in fused_decode fused_engine golden_gpu attention skinny_gemm; do
  echo "-- $t"; timeout 120 build-gpu/tests/gpu_${t}_test 2>&1 | grep -E "^\[  (PASSED|FAILED)|FAILED|Failure|error" | head -8
done
echo "tests $((SECONDS-start)) s"
mkdir -p $OUT/tl
for a in 1 0; do
  FUSELM_LAB_NOFLAGS=$a timeout 100 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" > $OUT/tl/$C-noflags$a.txt
  echo "== noflags $a"; grep -v "us after" $OUT/tl/$C-noflags$a.txt | grep -E " (attention|o) " | awk '{print $2,$3,$4,$5,$6,$7,$9,$10,$11,$15,$16}'
done
echo "timelines $((SECONDS-start)) s"
for s in llama-3.2-1b llama-3.1-8b; do
  timeout 150 bash scripts/gpu-ab.sh $s 2 grid:FUSELM_LAB_NOFLAGS=1 flags:FUSELM_LAB_NOFLAGS=0 -- --device cuda --dtype bf16 --scenario latency --reps 2 2>&1 | grep -v "^=="
  timeout 100 bash scripts/gpu-ab.sh $s 1 b16grid:FUSELM_LAB_NOFLAGS=1 b16flags:FUSELM_LAB_NOFLAGS=0 -- --device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2 2>&1 | grep -v "^==" | grep b16
done
echo "total $((SECONDS-start)) s"
