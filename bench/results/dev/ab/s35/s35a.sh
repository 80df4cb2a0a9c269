#!/usr/bin/env bash
# Session 35: the resident-step probe (bench/lab/resident_stream.cu) at the 1B and 8B shapes, one
# token: a weight stream that runs ahead across operations against the same tasks without lead and
# against one launch per operation with PDL. Needs nothing carried.
# Usage (GPU machine): OUT=$OUT bash bench/results/dev/ab/s35/s35a.sh
set -uo pipefail
mkdir -p "$OUT" .lab
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o .lab/resident_stream bench/lab/resident_stream.cu \
  > "$OUT/build.txt" 2>&1 || { tail -20 "$OUT/build.txt"; exit 1; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 300 .lab/resident_stream both 2>&1 | tee "$OUT/probe.txt"
