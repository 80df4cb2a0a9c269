#!/usr/bin/env bash
# Session 36, second call: two code arms against the tree.
# - warpkeys32: decode attention at head_dim 64 with a 32-key slice per warp (128-key stages), so a
#   batch-1 rank of 65-80 keys (8 ranks over 513-640 cached tokens) is one key step, not two.
#   Predicted 1B batch 1 +0.5-0.9% (one ~0.4 us step a layer), 8B unchanged (head_dim 128).
# - small = pick-max.patch + embed-first.patch (concatenated into /tmp/small.patch):
#   pick-max: the LM head's greedy pick folds each tile's key into the token's best key with an
#   atomic max; the last CTA takes it with one exchange instead of scanning 2,000 tile keys
#   (predicted ~1-2 us of the pick's 2.4-2.9 us tail);
#   embed-first: the embedding lets the first QKV projection launch at its start (up to 8 tokens,
#   where that projection reads the positions after its wait), so its weights stream during the
#   inputs' copy (predicted ~1-2 us). Together +0.2-0.5% on the 1B step.
# Tests on each arm's build: decode attention (bit-for-bit stacked/clusters, references), the skinny
# GEMM's greedy-pick tests, the fused engine.
# Usage (GPU machine, carry .deps .commit .gpu-models):  OUT=$OUT bash bench/results/dev/ab/s36/s36b.sh
set -uo pipefail
d=bench/results/dev/ab/s36
cat $d/pick-max.patch $d/embed-first.patch > /tmp/small.patch
AB_TESTS="attention skinny_gemm fused_engine" AB_TEST_FILTER="skinny_gemm:*Greedy*" \
  bash scripts/gpu-ab-patch.sh warpkeys32=$d/warpkeys32.patch small=/tmp/small.patch -- llama-3.2-1b:3 llama-3.2-1b:1:b16
