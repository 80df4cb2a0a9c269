#!/usr/bin/env bash
# Session 36, first call: the 1B decode timeline at HEAD (the LM head, the embedding, and the device's
# gap between two steps: DecodeTimeline.DISABLED_LabStepGap), to size what a step's start and end
# still cost. Then the plain bench once, as this machine's reference.
# Usage (GPU machine, carry .deps .commit .gpu-models):  OUT=$OUT bash bench/results/dev/ab/s36/s36a.sh
set -uo pipefail
mkdir -p "$OUT"
bash scripts/gpu-build.sh gpu_decode_timeline_test fuselm > "$OUT/build.txt" 2>&1 || { tail -20 "$OUT/build.txt"; exit 1; }
cat "$OUT/build.txt"
FUSELM_TIMELINE_SHAPE=llama-3.2-1b bash scripts/gpu-timeline.sh "$OUT/timeline.txt"
build-gpu/fuselm bench -m "synthetic:llama-3.2-1b?vocab=32000" --device cuda --dtype bf16 --scenario latency --reps 2 \
  --json "$OUT/bench-1b.json" 2>&1 | tail -4
