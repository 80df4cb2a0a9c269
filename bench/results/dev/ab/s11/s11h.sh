#!/usr/bin/env bash
# Session 11 (h): the attention launcher's messages (the new split bound), on the GPU.
set -uo pipefail
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target gpu_attention_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
build-gpu/tests/gpu_attention_test --gtest_filter='AttentionLauncher.*:AttentionDecode.EmptyAndInconsistentLengths' 2>&1 | tail -5
