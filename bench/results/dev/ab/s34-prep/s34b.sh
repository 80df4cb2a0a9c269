#!/usr/bin/env bash
# Prepared in session 33, for after s34a.sh: the decode timeline with PATCH (default the deep ring
# sized by m) applied, for its 1B batch-1 lines (late SMs: beside or after the predecessor's CTAs).
# Usage (GPU machine, carry .deps .commit .gpu-models): [PATCH=file] OUT=$OUT bash bench/results/dev/ab/s34-prep/s34b.sh
set -uo pipefail
mkdir -p "$OUT"
PATCH=${PATCH:-bench/results/dev/ab/s34-prep/x-by-m-deep.patch}
patch -p1 --forward < "$PATCH" > /dev/null || exit 1
bash scripts/gpu-build.sh gpu_decode_timeline_test > /dev/null 2>&1 || { echo "build failed"; exit 1; }
timeout 200 bash scripts/gpu-timeline.sh "$OUT/tl-patch.txt" > /dev/null
grep -E "llama-3.2-1b +1 " "$OUT/tl-patch.txt"
patch -R -p1 < "$PATCH" > /dev/null
