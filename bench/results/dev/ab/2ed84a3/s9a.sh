#!/usr/bin/env bash
# Session 9: decode attention in clusters by batch and length (isolated launches).
set -uo pipefail
source scripts/gpu-env.sh
[ -d build-gpu ] || cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > /tmp/cfg.log 2>&1
cmake --build build-gpu -j 16 --target gpu_attention_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
mkdir -p bench/results/dev/attention-lab
build-gpu/tests/gpu_attention_test --gtest_also_run_disabled_tests --gtest_filter='*DecodeClusters*' 2>&1 | grep "^\[bench\]" | tee bench/results/dev/attention-lab/$(cat .commit)-clusters.txt
cp bench/results/dev/attention-lab/$(cat .commit)-clusters.txt $OUT/
