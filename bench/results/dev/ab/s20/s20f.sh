#!/usr/bin/env bash
# Session 20 (f): the GPU tests on the fused path at the last kernel change (s20e ran the fused
# engine and fused decode tests): goldens (the GGUF one left off for the transfer limit), the CUDA
# engine, the decode timeline's ordered-record check, sampling.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target gpu_golden_gpu_test gpu_cuda_engine_test gpu_decode_timeline_test gpu_sampling_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
for t in golden_gpu cuda_engine decode_timeline sampling; do
  timeout 200 build-gpu/tests/gpu_${t}_test 2>&1 | grep -E "^\[  (FAILED|PASSED|  SKIPPED) |Failure" -A3 | head -12
done
echo "total $((SECONDS-start)) s"
