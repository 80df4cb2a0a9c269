#!/usr/bin/env bash
# Prepared in session 27: the next session's second call (~5 min), after s28a.sh's barrier probe.
# relaxed-bound.patch (MEASUREMENT ONLY, never to be kept): the skinny GEMM's K-split finishers and
# the decode merge cross their first cluster barrier with a relaxed arrive (no MEMBAR.ALL.GPU before
# UCGABAR_ARV; the shared-memory hand-off is then not ordered by the memory model). The step's gain
# is an upper bound on what those releasing arrives cost, and says whether a hand-off without them
# (st.async into the reader's shared memory, completing an mbarrier's transaction count) is worth
# building. The skinny GEMM tests show whether the bits survive in practice.
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s28-prep/s28b.sh
set -uo pipefail
start=$SECONDS
export FUSELM_COMMIT=$(cat .commit 2>/dev/null || echo unknown)
D=bench/results/dev/ab/s28-prep
bash scripts/gpu-build.sh fuselm || exit 1
cp build-gpu/fuselm /tmp/fuselm-base
patch -p1 < $D/relaxed-bound.patch > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm gpu_skinny_gemm_test || exit 1
echo "== skinny_gemm (relaxed bound)"
timeout 120 build-gpu/tests/gpu_skinny_gemm_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
echo "build and tests $((SECONDS-start)) s"
rm -f bench/results/dev/ab/*.json
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
timeout 120 bash scripts/gpu-ab.sh llama-3.2-1b 3 base:AB_BIN=/tmp/fuselm-base relaxed -- $LAT 2>&1 | grep -v "^=="
timeout 100 bash scripts/gpu-ab.sh llama-3.1-8b 2 base:AB_BIN=/tmp/fuselm-base relaxed -- $LAT 2>&1 | grep -v "^==" | grep -v 1b-
timeout 120 bash scripts/gpu-ab.sh llama-3.1-8b 2 base16:AB_BIN=/tmp/fuselm-base relaxed16 -- --device cuda --dtype bf16 \
    --scenario throughput --batches 16 --reps 2 2>&1 | grep -v "^==" | grep 16-
echo "A/B $((SECONDS-start)) s"
mkdir -p $OUT/s28b && cp bench/results/dev/ab/*.json $OUT/s28b/ 2>/dev/null
(cd $OUT && tar czf s28b.tgz s28b && rm -rf s28b)
echo "total $((SECONDS-start)) s"
