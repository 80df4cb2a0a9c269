#!/usr/bin/env bash
# Session 32, first call: decode attention's cluster merge by push, against the tree (2635890).
#   push:    when each cluster has one item and each rank at most two 64-key stages, the ranks store
#            their states into the merging rank's last K/V stage with st.async, counted on its
#            mbarrier: no cluster barrier before or after the merge, no claim (push-merge.patch;
#            same bits). ptxas: the head-dim-64 3-stage instance 168 -> 196 registers, 128: 240 -> 252.
#   push168: the same, with the head-dim-64 instances held to three CTAs an SM (168 registers,
#            10 bytes of spill stores) by a launch bound (push-168.patch).
# Predicted 1B batch 1 +0.5-2% (the 1B merge takes 1.84 us from the key loop's end to the output,
# then 0.4 us to the kernel's end: timeline 65680a4), 8B batch 1 +0.3-1%; batch 16 runs the stacked
# kernel, unchanged.
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s32/s32a.sh
set -uo pipefail
AB_TESTS="attention fused_engine" AB_TEST_FILTER='attention:*Decode*' OUT=$OUT timeout 570 \
    bash scripts/gpu-ab-patch.sh push=bench/results/dev/ab/s32/push-merge.patch \
    push168=bench/results/dev/ab/s32/push-168.patch -- llama-3.2-1b:3 llama-3.1-8b:1 2>&1 | grep -v "^== llama"
