#!/usr/bin/env bash
# Session 38, second call: bounds on what the step's start and end cost (measurement only, wrong
# results): the lab (DecodeTimeline.DISABLED_LabStepGap with bounds.patch) replays one step a
# graph without the inputs' copy kernel, the embedding, the sampling kernel and/or the LM head's
# greedy pick, on the 8B and 1B shapes at batch 1, two rounds.
# Usage (GPU machine, carry .deps .commit):  OUT=$OUT bash bench/results/dev/ab/s38/s38b.sh
set -uo pipefail
mkdir -p "$OUT"
patch -p1 < bench/results/dev/ab/s38/bounds.patch > /dev/null || { echo "bounds.patch does not apply"; exit 1; }
bash scripts/gpu-build.sh gpu_decode_timeline_test > "$OUT/build.txt" 2>&1 || { tail -20 "$OUT/build.txt"; exit 1; }
cat "$OUT/build.txt"
timeout 300 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests \
  --gtest_filter='*LabStepGap*' 2>&1 | grep '^\[bench\]' | tee "$OUT/bounds.txt"
patch -R -p1 < bench/results/dev/ab/s38/bounds.patch > /dev/null
