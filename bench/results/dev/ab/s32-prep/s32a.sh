#!/usr/bin/env bash
# Prepared in session 31 (its device time ran out before it could run): the CTA pipeline's consumers
# read a whole stage's fragments into registers, hand the stage back to the producer, and only then run
# the mma chain (release-early.patch; the same mma in the same order: the same bits). Session 31's
# `nomath` bound (consumers handing stages back with no math at all) gave the 8B batch-16 step +3.3%,
# so the time a stage is held for the math is worth something; this keeps the math but takes it off
# the refill's path. Predicted: 8B batch 16 +1-2% decode-step tok/s; batch 1 even (there only the
# gate/up projection and the LM head run the CTA pipeline). Registers (ptxas, bf16) of the instances
# the rules run: rt1_w4 at 16 tokens with the residual epilogue 48 -> 72, with QKV 54 -> 80 (still
# five CTAs an SM), rt1_w7 with SwiGLU 45 -> 48 (16 tokens) and 32 -> 42 (one token); no spills.
# Skinny GEMM tests (the rounding classes' bits) and fused engine tests on the arm, then 8B batch 16,
# 1B and 8B batch 1.
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s32-prep/s32a.sh
set -uo pipefail
AB_TESTS="skinny_gemm fused_engine" OUT=$OUT bash scripts/gpu-ab-patch.sh early=bench/results/dev/ab/s32-prep/release-early.patch \
    -- llama-3.1-8b:3:b16 llama-3.2-1b:2 llama-3.1-8b:1 2>&1 | grep -v "^== llama"
