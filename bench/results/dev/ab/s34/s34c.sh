#!/usr/bin/env bash
# Session 34: keep a fixed share of the weights in L2 from one step to the next. The weight stream
# is marked evict-first (session 8); with a fractional policy a share f of its lines is marked
# evict-last instead, so they survive the step's 2.1 GB (1B) of evict-first lines and are read from
# L2 in the next step. 1B: 2,077 MB of weights a step, so f = 0.5% / 1% / 1.5% keeps 10 / 21 / 31 MB
# (L2 50 MB, of which the 1B K/V cache at 512-640 tokens takes up to 21 MB at normal priority).
# Same bits (a cache policy). Predicted 1B +0.3 / +0.7 / +0.9% if the share fits and each launch's
# K loop shortens by its share; 8B (14.2 GB a step: 71-213 MB marked) even or worse, as its share
# does not fit and thrashes. Usage (GPU machine, carry .deps .commit .gpu-models):
#   OUT=$OUT bash bench/results/dev/ab/s34/s34c.sh
set -uo pipefail
mkdir -p "$OUT"
d=bench/results/dev/ab/s34
OUT=$OUT timeout 540 bash scripts/gpu-ab-patch.sh l2keep-005=$d/l2keep-005.patch \
    l2keep-01=$d/l2keep-01.patch l2keep-015=$d/l2keep-015.patch \
    -- llama-3.2-1b:3 llama-3.1-8b:1 2>&1 | grep -v "^== llama"
