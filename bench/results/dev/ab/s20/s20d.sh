#!/usr/bin/env bash
# Session 20 (d): s20c measured the graph replayed back to back at 3842.8 us (8B) and 829.1 us
# (1B), and 17.6-17.5 us more with the copy of the inputs before each replay and of the ids after
# it. Now the graph copies its inputs itself (a kernel reading the pinned staging of its replay
# slot) and the sampling kernel writes the ids to pinned memory: no copy operations between steps.
# Prediction: ~-14 us a token (the input kernel and its boundary take ~3 of the 17.5): 8B +0.35%,
# 1B +1.7%. The GPU tests the change touches first, then the lab and the bench A/B.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_fused_engine_test gpu_cuda_engine_test gpu_fused_decode_test gpu_decode_timeline_test gpu_sampling_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
for t in fused_engine cuda_engine fused_decode sampling decode_timeline; do
  timeout 300 build-gpu/tests/gpu_${t}_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
done
timeout 300 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*LabStepGap*' 2>&1 | grep -E "\[bench\]|FAILED|Failure"
echo "tests $((SECONDS-start)) s"
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
T16="--device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2"
timeout 120 bash scripts/gpu-ab.sh llama-3.1-8b 3 pipe sync:arg:--sync-decode -- $LAT 2>&1 | grep -v "^=="
timeout 100 bash scripts/gpu-ab.sh llama-3.2-1b 3 pipe sync:arg:--sync-decode -- $LAT 2>&1 | grep -v "^=="
timeout 100 bash scripts/gpu-ab.sh llama-3.1-8b 1 pipe16 -- $T16 2>&1 | grep -E "16-[12] "
timeout 100 bash scripts/gpu-ab.sh llama-3.2-1b 1 pipe16 -- $T16 2>&1 | grep -E "16-[12] "
tar czf $OUT/ab.tar.gz bench/results/dev/ab/*.json 2>/dev/null
echo "total $((SECONDS-start)) s"
