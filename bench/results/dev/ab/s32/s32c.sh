#!/usr/bin/env bash
# Session 32, third call: the early stage release again (../s32-prep/release-early.patch; s32-prep's
# call gave 1B batch 1 +0.25%, 8B batch 1 -0.15% in one round, batch 16 even), more rounds at batch 1.
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s32/s32c.sh
set -uo pipefail
OUT=$OUT timeout 500 bash scripts/gpu-ab-patch.sh early=bench/results/dev/ab/s32-prep/release-early.patch \
    -- llama-3.2-1b:3 llama-3.1-8b:3 2>&1 | grep -v "^== llama"
