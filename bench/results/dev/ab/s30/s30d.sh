#!/usr/bin/env bash
# Session 30, fourth call: one-token 8-warp GEMMs whose warps take exactly four stages, on a grid of one
# CTA per SM (the 1B O projection), get a fifth stage so that the whole K loop is in flight before the
# wait (whole-ring.patch); the diagnostic marks showed that loop 1.4 us long with only its last stage
# issued after the wait. Skinny GEMM and fused engine tests on the arm, then 1B and 8B batch 1.
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s30/s30d.sh
set -uo pipefail
AB_TESTS="skinny_gemm fused_engine" OUT=$OUT bash scripts/gpu-ab-patch.sh whole=bench/results/dev/ab/s30/whole-ring.patch \
    -- llama-3.2-1b:3 llama-3.1-8b:1 2>&1 | grep -v "^== llama"
