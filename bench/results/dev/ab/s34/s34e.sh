#!/usr/bin/env bash
# Session 34: the decode timeline with the LM head as a sixth kind and the embedding's own time, to
# see where the ~47 us of the traced 1B step outside its layers go (LM head floor ~28 us). Then the
# timeline's own tests (S34E_TESTS=1). The 1B shape only unless FUSELM_TIMELINE_SHAPE says otherwise.
# Usage (GPU machine, carry .deps .commit .gpu-models):
#   OUT=$OUT bash bench/results/dev/ab/s34/s34e.sh
set -uo pipefail
mkdir -p "$OUT"
bash scripts/gpu-build.sh gpu_decode_timeline_test > "$OUT/build.txt" 2>&1 || { tail -20 "$OUT/build.txt"; exit 1; }
FUSELM_TIMELINE_SHAPE=${FUSELM_TIMELINE_SHAPE:-llama-3.2-1b} bash scripts/gpu-timeline.sh "$OUT/timeline.txt"
if [ "${S34E_TESTS:-0}" = 1 ]; then
  timeout 120 build-gpu/tests/gpu_decode_timeline_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
fi
