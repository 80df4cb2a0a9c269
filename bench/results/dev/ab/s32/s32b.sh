#!/usr/bin/env bash
# Session 32, second call: the decode timeline with the merge by push and without (push-merge.patch),
# to see where the merge's time went (the A/B of s32a: even).
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s32/s32b.sh
set -uo pipefail
mkdir -p "$OUT"
patch -p1 --forward < bench/results/dev/ab/s32/push-merge.patch > /dev/null || exit 1
bash scripts/gpu-build.sh gpu_decode_timeline_test > /dev/null 2>&1 || { echo "push build failed"; exit 1; }
timeout 200 bash scripts/gpu-timeline.sh "$OUT/tl-push.txt" 2>&1 | grep -E "llama-3.2-1b +1 |shape" | head -12
patch -R -p1 < bench/results/dev/ab/s32/push-merge.patch > /dev/null || exit 1
bash scripts/gpu-build.sh gpu_decode_timeline_test > /dev/null 2>&1 || { echo "base build failed"; exit 1; }
timeout 200 bash scripts/gpu-timeline.sh "$OUT/tl-base.txt" 2>&1 | grep -E "llama-3.2-1b +1 |shape" | head -12
