#!/usr/bin/env bash
# Session 14 (b): the copy probe's non-persistent chunk copies; the decode attention tests of the
# issue-ahead build (s14a's run timed out at 150 s), with their time.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
nvcc -O3 -arch=sm_90a -std=c++17 -o /tmp/copy_probe bench/lab/copy_probe.cu || exit 1
timeout 90 /tmp/copy_probe chunks; echo "chunks rc=$? $((SECONDS-start)) s"
cmake --build build-gpu -j 16 --target gpu_attention_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
timeout 400 build-gpu/tests/gpu_attention_test --gtest_filter='*Decode*' > /tmp/at.log 2>&1; echo "attention decode rc=$? $((SECONDS-start)) s"
grep -E '^\[  (PASSED|FAILED) |^\[       OK|^\[ RUN' /tmp/at.log | tail -60 | cut -c1-150
