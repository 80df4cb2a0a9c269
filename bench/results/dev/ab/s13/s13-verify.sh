#!/usr/bin/env bash
# Session 13: the GPU tests that cover the launcher refactor (skinny GEMM, decode attention, the fused step, plan kernels).
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target gpu_skinny_gemm_test gpu_attention_test gpu_fused_decode_test gpu_plan_kernels_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
for t in gpu_skinny_gemm_test gpu_attention_test gpu_fused_decode_test gpu_plan_kernels_test; do
  timeout 120 build-gpu/tests/$t > /tmp/$t.log 2>&1; rc=$?
  echo "$t rc=$rc $(grep -E '^\[  (PASSED|FAILED)  \]' /tmp/$t.log | tr '\n' ' ') $((SECONDS-start)) s"
  grep -E '^\[  FAILED  \]' /tmp/$t.log | head -5
done
