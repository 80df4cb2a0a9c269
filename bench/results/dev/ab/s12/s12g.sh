#!/usr/bin/env bash
# Session 12 (g): attention -> O readiness flags without each thread's fence before the cluster
# barrier (LAB FUSELM_LAB_NOFENCE), against the grid wait (LAB FUSELM_LAB_NOFLAGS=1) and the flags
# with the fence; batch 1 and batch 16, in turns.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_fused_decode_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
FUSELM_LAB_NOFENCE=1 build-gpu/tests/gpu_fused_decode_test 2>&1 | grep -E "^\[  (PASSED|FAILED)|FAILED" | head -4
for s in llama-3.2-1b llama-3.1-8b; do
  timeout 150 bash scripts/gpu-ab.sh $s 2 grid:FUSELM_LAB_NOFLAGS=1 nofence:FUSELM_LAB_NOFENCE=1 fence:FUSELM_LAB_NOFLAGS=0 -- --device cuda --dtype bf16 --scenario latency --reps 2 2>&1 | grep -v "^=="
  timeout 100 bash scripts/gpu-ab.sh $s 1 b16grid:FUSELM_LAB_NOFLAGS=1 b16nofence:FUSELM_LAB_NOFENCE=1 -- --device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2 2>&1 | grep -v "^==" | grep b16
done
echo "total $((SECONDS-start)) s"
