#!/usr/bin/env bash
# The decode step's kernel timeline on a machine with an NVIDIA GPU (DecodeTimeline.DISABLED_Lab*:
# batch 1 and 16 on the 8B and 1B synthetic shapes, each kernel's marks per layer, then the step's
# gaps): writes the lab's [bench] lines to FILE and prints the short table (shape, batch, kernel,
# start_l, rel_l, m0_l, m1_l, m2_l, end_l, end, step_us). Needs build-gpu/tests/gpu_decode_timeline_test
# (scripts/gpu-build.sh gpu_decode_timeline_test).
# Usage: bash scripts/gpu-timeline.sh FILE
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: gpu-timeline.sh FILE}
mkdir -p "$(dirname "$out")"
timeout 150 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 |
    grep "^\[bench\]" > "$out"
grep -v -e "us after" -e "CTAs an SM" -e "late SMs" -e "embedding:" -e "forward_sample" -e "one at a time" \
    -e "a graph" "$out" |
    awk '{print $2,$3,$4,$6,$8,$9,$10,$11,$15,$16,$17}'
grep -e "embedding:" -e "forward_sample" -e "pipelined" -e "a graph" "$out" | sed 's/^\[bench\] *//'
