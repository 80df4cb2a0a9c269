#!/usr/bin/env bash
# Session 21 (e): the one-launch FFN alone against the two launches alone (new lab
# SkinnyFfn.DISABLED_Lab: each sequence on its own stream with PDL, 200 launches, CUDA events), at
# 4, 8 and 12 ring stages, on the 1B and 8B FFN shapes at one token. s21c/d put the one launch's
# weight stream at ~3.2 TB/s inside the step against ~4 for the two launches; this separates the
# kernel from its neighbours and tells whether ring depth moves it.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target gpu_skinny_ffn_test > /tmp/b.log 2>&1 || { grep -E "error" -A3 /tmp/b.log | head -40; exit 1; }
echo "build $((SECONDS-start)) s"
timeout 120 build-gpu/tests/gpu_skinny_ffn_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" | head -10
timeout 200 build-gpu/tests/gpu_skinny_ffn_test --gtest_also_run_disabled_tests --gtest_filter='*DISABLED_Lab' 2>&1 | grep -E "\[bench\]|Failure"
echo "total $((SECONDS-start)) s"
