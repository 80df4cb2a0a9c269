#!/usr/bin/env bash
# Profiles one fused decode step kernel by kernel on a machine with an NVIDIA GPU and Nsight Compute:
# builds `fuselm` (sm_90a only), runs `fuselm generate` on synthetic models under ncu (each graph
# node timed on its own, so PDL overlap between kernels is not part of these times), and prints
# per kernel kind: launches per step, total and mean µs; then the step time `fuselm bench` measures
# (with overlap) for comparison.
# Usage: bash scripts/gpu-profile.sh [PRESET ...]   (default: llama-3.2-1b llama-3.1-8b)
# Writes ncu CSVs and the summary to $OUT (or build-gpu/profile).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
build=build-gpu
out=${OUT:-$build/profile}
mkdir -p "$out"
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(llama-3.2-1b llama-3.1-8b)

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real \
      >"$out/configure.log" 2>&1 && cmake --build "$build" -j "$(nproc)" --target fuselm >"$out/build.log" 2>&1 ||
  { tail -30 "$out/build.log"; exit 1; }
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
prompt=$(seq -s, 1000 1511)  # 512 prompt tokens
for preset in "${presets[@]}"; do
  model="synthetic:$preset?vocab=32000"
  timeout 300 "$ncu" --csv --print-units base --metrics gpu__time_duration.sum --graph-profiling node \
      "$build/fuselm" generate -m "$model" --device cuda --prompt-ids "$prompt" -n 3 --temperature 0 --ignore-eos \
      ${FUSELM_PROFILE_PLAN:+--plan "$FUSELM_PROFILE_PLAN"} >"$out/ncu-$preset.csv" 2>"$out/ncu-$preset.err"
  echo "== $preset (ncu exit $?): one decode step, kernels timed one at a time"
  python3 scripts/step_profile.py "$out/ncu-$preset.csv" | tee "$out/profile-$preset.txt"
done
for preset in "${presets[@]}"; do
  echo "== $preset: fuselm bench latency (kernels overlapping as in service)"
  "$build/fuselm" bench -m "synthetic:$preset?vocab=32000" --scenario latency --reps 2 --gen-len 64 --no-peak -q \
      ${FUSELM_PROFILE_PLAN:+--plan "$FUSELM_PROFILE_PLAN"} --json "$out/bench-$preset.json" 2>&1 | tail -12
done
