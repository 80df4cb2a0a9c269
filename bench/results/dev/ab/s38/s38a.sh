#!/usr/bin/env bash
# Session 38, first call: what the boundary between two decode graphs costs a step. The lab
# (DecodeTimeline.DISABLED_LabStepGap) replays the same step as 1, 2, 4 and 8 steps to a graph,
# back to back, on the 8B and 1B shapes at batch 1; then the plain bench of the 1B shape once, as
# this machine's reference.
# Usage (GPU machine, carry .deps .commit):  OUT=$OUT bash bench/results/dev/ab/s38/s38a.sh
set -uo pipefail
mkdir -p "$OUT"
bash scripts/gpu-build.sh gpu_decode_timeline_test fuselm > "$OUT/build.txt" 2>&1 || { tail -20 "$OUT/build.txt"; exit 1; }
cat "$OUT/build.txt"
timeout 200 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests \
  --gtest_filter='*LabStepGap*' 2>&1 | grep '^\[bench\]' | tee "$OUT/step-gap.txt"
build-gpu/fuselm bench -m "synthetic:llama-3.2-1b?vocab=32000" --device cuda --dtype bf16 --scenario latency --reps 2 \
  --json "$OUT/bench-1b.json" 2>&1 | tail -4
