#!/usr/bin/env bash
# Session 20 (c): s20b measured pipelined decode at +0.1% (8B) and +0.2% (1B) at batch 1, so the
# ~36 us between two steps is not the host. Here, per shape at batch 1: a token's host time one step
# at a time and pipelined, and the step's graph replayed back to back with and without the copies
# of its inputs and ids (CudaEngine::lab_replay_decode_us), next to s20a's traced numbers. Then the
# fused engine tests again (the pipelined-decode test, fixed).
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target gpu_fused_engine_test gpu_decode_timeline_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
timeout 300 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*LabStepGap*' 2>&1 | grep -E "\[bench\]|FAILED|Failure"
timeout 300 build-gpu/tests/gpu_fused_engine_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -20
echo "total $((SECONDS-start)) s"
