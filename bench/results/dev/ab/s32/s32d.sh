#!/usr/bin/env bash
# Session 32, last call: what the idle clusters of the batch-1 attention launch cost (measurement
# only, right only up to 8 x 256 cached tokens: no-idle-clusters-bound.patch launches one cluster per
# head group at batch 1, where the rules launch up to 32 clusters for the longest sequence's items).
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s32/s32d.sh
set -uo pipefail
OUT=$OUT timeout 280 bash scripts/gpu-ab-patch.sh noidle=bench/results/dev/ab/s32/no-idle-clusters-bound.patch \
    -- llama-3.2-1b:2 2>&1 | grep -v "^== llama"
