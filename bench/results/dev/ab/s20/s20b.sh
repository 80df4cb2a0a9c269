#!/usr/bin/env bash
# Session 20 (b): pipelined decode steps (Engine::submit_sample; the next step queued behind the one
# in flight and fed its tokens on the device) against one step at a time (--sync-decode). s20a put
# the device's idle time between two steps of the bench loop at ~36 us (8B and 1B, batch 1).
# Prediction: batch 1 +0.7% (8B, 3.89 -> ~3.86 ms a token) and +3-4% (1B, 0.86 -> ~0.83 ms); batch
# 16 about the same microseconds a step. First the GPU tests the change touches.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_fused_engine_test gpu_cuda_engine_test gpu_fused_decode_test gpu_decode_timeline_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
for t in fused_engine cuda_engine fused_decode decode_timeline; do
  timeout 300 build-gpu/tests/gpu_${t}_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure|tests ran" -A3 | head -20
done
echo "tests $((SECONDS-start)) s"
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
T16="--device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2"
timeout 120 bash scripts/gpu-ab.sh llama-3.1-8b 3 pipe sync:arg:--sync-decode -- $LAT 2>&1 | grep -v "^=="
timeout 100 bash scripts/gpu-ab.sh llama-3.2-1b 3 pipe sync:arg:--sync-decode -- $LAT 2>&1 | grep -v "^=="
timeout 100 bash scripts/gpu-ab.sh llama-3.1-8b 2 pipe16 sync16:arg:--sync-decode -- $T16 2>&1 | grep -E "16-[12] "
timeout 100 bash scripts/gpu-ab.sh llama-3.2-1b 2 pipe16 sync16:arg:--sync-decode -- $T16 2>&1 | grep -E "16-[12] "
tar czf $OUT/ab.tar.gz bench/results/dev/ab/*.json 2>/dev/null
echo "total $((SECONDS-start)) s"
