#!/usr/bin/env bash
# Session 17 (d): fuselm tune timing each variant on the layout the engine packs for it (tile groups):
# the plan-kernels GPU test (tune gives a valid plan) and the 8B / 1B tune picks.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_plan_kernels_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
timeout 90 build-gpu/tests/gpu_plan_kernels_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" | head
for s in llama-3.1-8b llama-3.2-1b; do
  timeout 90 build-gpu/fuselm tune -m "synthetic:$s?vocab=32000" --dtype bf16 -o $OUT/tune-$s.json > $OUT/tune-$s.log 2>&1
  grep -E "^(gate_up|lm_head|qkv|o|down) " $OUT/tune-$s.log | cut -c1-220
done
echo "total $((SECONDS-start)) s"
