#!/usr/bin/env bash
# Session 14 (e): the sm_90a prefill GEMMs for qkv, o and down too (tiles of 128 or 256 features):
# tests, the per-projection lab against cuBLASLt, and prefill in the engine by arm
# (FUSELM_LAB_PREFILL_GEMM = 128, 256, 0 for cuBLASLt), with the baseline path's prefill beside it.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
tests="gpu_gemm_sm90_test gpu_golden_gpu_test gpu_fused_engine_test gpu_cuda_engine_test"
cmake --build build-gpu -j 16 --target fuselm $tests > /tmp/b.log 2>&1 || { grep -E "error" /tmp/b.log | head -20; tail -5 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
for t in $tests; do
  timeout 200 build-gpu/tests/$t > /tmp/$t.log 2>&1; rc=$?
  echo "$t rc=$rc $(grep -E '^\[  (PASSED|FAILED)  \]' /tmp/$t.log | tr '\n' ' ') $((SECONDS-start)) s"
  grep -E '^\[  FAILED  \]|Failure|error:' /tmp/$t.log | head -12 | cut -c1-300
done
timeout 150 build-gpu/tests/gpu_gemm_sm90_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[lab\]"
echo "lab $((SECONDS-start)) s"
mkdir -p /tmp/s14e
for s in llama-3.1-8b llama-3.2-1b; do
  for arm in 128 256 0 baseline; do
    if [ $arm = baseline ]; then args="--path baseline"; v=""; else args=""; v="FUSELM_LAB_PREFILL_GEMM=$arm"; fi
    env $v timeout 120 build-gpu/fuselm bench -m "synthetic:$s?vocab=32000" --device cuda --dtype bf16 -q --no-peak --scenario prefill \
      --prefill-lens 128,512,2048,8192 $args --json /tmp/s14e/p-$s-$arm.json > /tmp/l.txt 2>&1 || tail -3 /tmp/l.txt
    python3 -c "
import json,sys; s=json.load(open(sys.argv[1]))['scenarios']; print(sys.argv[2], ' '.join('p%d %.0f tok/s %.0f TF' % (t['tokens'], t['tok_s'], t['tflops']) for t in s['prefill']))" /tmp/s14e/p-$s-$arm.json "$s $arm"
  done
done
echo "engine $((SECONDS-start)) s"
(cd /tmp && tar czf $OUT/s14e.tgz s14e)
