#!/usr/bin/env bash
# Timeline of fused decode steps, with kernels overlapping as they do in service (unlike
# scripts/gpu-profile.sh, whose Nsight Compute times each kernel alone): Nsight Systems traces
# `fuselm generate` on synthetic models (batch 1, prompt 512), graph nodes one by one, and
# scripts/step_timeline.py splits the median step by kernel kind.
# Usage: bash scripts/gpu-timeline.sh [PRESET ...]   (default: llama-3.2-1b llama-3.1-8b)
# Needs a built build-gpu/fuselm (scripts/gpu-check.sh). Writes to $OUT (or build-gpu/timeline).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
out=${OUT:-build-gpu/timeline}
mkdir -p "$out"
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(llama-3.2-1b llama-3.1-8b)
nsys=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/nsight-systems*/bin/nsys 2>/dev/null | head -1)
[ -n "$nsys" ] || { echo "no nsys on this machine"; exit 0; }
prompt=$(seq -s, 1000 1511)
for preset in "${presets[@]}"; do
  timeout 200 "$nsys" profile -t cuda --cuda-graph-trace=node -o "$out/step-$preset" --force-overwrite true \
      build-gpu/fuselm generate -m "synthetic:$preset?vocab=32000" --device cuda --prompt-ids "$prompt" -n 24 \
      --temperature 0 --ignore-eos >"$out/nsys-$preset.log" 2>&1 || { echo "nsys failed:"; tail -5 "$out/nsys-$preset.log"; }
  "$nsys" stats -r cuda_gpu_trace -f csv -o "$out/trace-$preset" "$out/step-$preset.nsys-rep" >/dev/null 2>&1
  csv=$(ls "$out"/trace-"$preset"*.csv 2>/dev/null | head -1)
  echo "== $preset: one fused decode step (batch 1, after a 512-token prompt)"
  [ -n "$csv" ] && python3 scripts/step_timeline.py "$csv" 12 | tee "$out/timeline-$preset.txt"
done
