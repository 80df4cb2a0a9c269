#!/usr/bin/env bash
# Session 19 (f): the skinny GEMM and fused engine GPU tests after the launcher refactor (code moved only).
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target gpu_skinny_gemm_test gpu_fused_engine_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
timeout 90 build-gpu/tests/gpu_skinny_gemm_test --gtest_filter='-SkinnyGemmTiming*' 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" | head -10
timeout 60 build-gpu/tests/gpu_fused_engine_test --gtest_filter='*TileGroup*:*Invarian*' 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" | head -10
echo "total $((SECONDS-start)) s"
