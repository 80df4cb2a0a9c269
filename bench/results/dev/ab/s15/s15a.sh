#!/usr/bin/env bash
# Stacked decode attention: correctness tests, then the lab against clusters.
set -uo pipefail
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/cfg.log 2>&1 || tail -20 /tmp/cfg.log
start=$SECONDS
cmake --build build-gpu -j 16 --target gpu_attention_test > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
echo "build $((SECONDS-start)) s"
timeout 300 build-gpu/tests/gpu_attention_test --gtest_filter='AttentionDecode*:*DecodeTest*:AttentionSmall.Decode*' 2>&1 | grep -E "^\[  (FAILED|PASSED|  OK) |Failure|differ|error" | head -60
echo "tests $((SECONDS-start)) s"
timeout 200 build-gpu/tests/gpu_attention_test --gtest_also_run_disabled_tests --gtest_filter='*DecodeStacked*' 2>&1 | grep "^\[bench\]" | tee $OUT/stacked-lab.txt
echo "total $((SECONDS-start)) s"
