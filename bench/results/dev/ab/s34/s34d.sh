#!/usr/bin/env bash
# Session 34, after s34a: `deep` (the deep ring's activation stages sized by m) lost 1B -1.0% and
# 8B -2.8%, where no 8B launch takes the deep ring: its runtime-m stage layout was compiled into
# every warp-pipeline instance, so it measured the K loop's extra address arithmetic as much as the
# room. Here the row count is a template parameter (X_ROWS) and only m = 1 launches take an
# instance with one activation row a stage, so every other instance is the tree's code.
# deepx1: the deep ring only (1B down projection, 204 -> 140 KB; predicted 1B +0.5-1.5%, 8B even:
#   no 8B launch takes it). allx1: every one-token warp-pipeline launch (s33's x-by-m without its
#   code cost: 1B/8B QKV, O, down; tells whether s33c's -5%/-9% was stacking or code).
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s34/s34d.sh
set -uo pipefail
mkdir -p "$OUT"
d=bench/results/dev/ab/s34
AB_TESTS="skinny_gemm fused_engine" OUT=$OUT timeout 560 bash scripts/gpu-ab-patch.sh \
    deepx1=$d/deepx1.patch allx1=$d/allx1.patch -- llama-3.2-1b:3 llama-3.1-8b:1 2>&1 | grep -v "^== llama"
