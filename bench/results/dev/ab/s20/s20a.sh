#!/usr/bin/env bash
# Session 20 (a): how long the device idles between two decode steps of the bench's loop
# (DecodeTimeline.DISABLED_LabStepGap), batch 1, prompt 512, both shapes; then the bench's own
# latency run of the same build, for the per-token time next to it.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_decode_timeline_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
timeout 200 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*LabStepGap*' 2>&1 | grep -E "\[bench\]|FAILED|Failure"
for shape in llama-3.1-8b llama-3.2-1b; do
  timeout 60 build-gpu/fuselm bench --model synthetic:$shape?vocab=32000 --device cuda --dtype bf16 --scenario latency --reps 2 --no-peak 2>&1 | tail -12
done
echo "total $((SECONDS-start)) s"
