#!/usr/bin/env bash
# Prepared in session 32 for after s33a: the 1B QKV projection's one-token CTAs (rt1_w8, 192 CTAs,
# a K loop of four stages a warp) with three stages instead of four (qkv-three-stages.patch): 77 KB
# instead of 102 KB a CTA, so an SM holding two of them has room for a 51 KB decode attention CTA
# (and a third QKV CTA still does not fit). Same bits (the stage count changes no result); no other
# GEMM of either shape takes the branch (8B: rt1_w4 twins and 8-stage K loops). Predicted: if s33a
# shows the last attention CTAs starting only once QKV CTAs leave their SMs, 1B batch 1 +1-2%
# (attention's last cluster placed ~1 us earlier, the QKV projection up to 0.3 us slower with one
# stage fewer before its wait); otherwise even or a small loss. 8B: even (no change).
# Second arm, qkv3push: the same with session 32's merge by push (../s32/push-merge.patch), which
# shortened the 1B merge by 0.4 us but lost it to a later placement of the last cluster (its 196
# registers: two attention CTAs an SM instead of three); with room beside the QKV CTAs, the
# registers may no longer decide the placement.
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s33-prep/s33b.sh
set -uo pipefail
AB_TESTS="attention fused_engine" AB_TEST_FILTER='attention:*Decode*' OUT=$OUT timeout 570 \
    bash scripts/gpu-ab-patch.sh qkv3=bench/results/dev/ab/s33-prep/qkv-three-stages.patch \
    qkv3push=bench/results/dev/ab/s33-prep/qkv3-push.patch -- llama-3.2-1b:3 llama-3.1-8b:1 2>&1 | grep -v "^== llama"
