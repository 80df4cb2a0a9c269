#!/usr/bin/env bash
# Session 28, second call (~9 min):
# 1. the probe's barrier cases again with the st.async + mbarrier hand-off added (and its SASS);
# 2. arms against the base: relaxed (s28-prep/relaxed-bound.patch, MEASUREMENT ONLY: the skinny
#    GEMM's K-split finishers and the decode merge cross their first cluster barrier with a relaxed
#    arrive; an upper bound of what the releasing arrives cost the step) and stasync
#    (st-async-inbox.patch: the CTA and register pipelines' K-split partials pushed by st.async into
#    the finisher's own inbox, counted on its mbarrier; no cluster barrier after the K loop);
# 3. skinny GEMM, fused engine and fused decode GPU tests on the stasync build; A/B 1B, 8B, 8B b16.
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s28/s28b.sh
set -uo pipefail
start=$SECONDS
export FUSELM_COMMIT=$(cat .commit 2>/dev/null || echo unknown)
D=bench/results/dev/ab/s28
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a bench/lab/latency_under_stream.cu -o /tmp/lus &&
    /tmp/lus > $OUT/latency-under-stream-st-async.txt 2>&1
grep -A100 "barrier case" $OUT/latency-under-stream-st-async.txt | grep -E "relaxed arrive|st.async" | head -12
cuobjdump -sass /tmp/lus | awk '/Function : /{on = /barrier_cost/} on' > $OUT/barrier-cost-sass-full.txt
grep -E "SYNCS|UCGABAR|MEMBAR|STAS|FENCE" $OUT/barrier-cost-sass-full.txt | sed -E 's/^\s+\/\*[0-9a-f]+\*\/\s+//; s/;.*//' | sort | uniq -c
bash scripts/gpu-build.sh fuselm || exit 1
cp build-gpu/fuselm /tmp/fuselm-base
patch -p1 < bench/results/dev/ab/s28-prep/relaxed-bound.patch > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm || exit 1
cp build-gpu/fuselm /tmp/fuselm-relaxed
patch -R -p1 < bench/results/dev/ab/s28-prep/relaxed-bound.patch > /dev/null || exit 1
patch -p1 < $D/st-async-inbox.patch > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm gpu_skinny_gemm_test gpu_fused_engine_test gpu_fused_decode_test || exit 1
cp build-gpu/fuselm /tmp/fuselm-stasync
for t in skinny_gemm fused_engine fused_decode; do
  echo "== $t"
  timeout 150 build-gpu/tests/gpu_${t}_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
done
patch -R -p1 < $D/st-async-inbox.patch > /dev/null || exit 1
echo "build and tests $((SECONDS-start)) s"
rm -f bench/results/dev/ab/*.json
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
ARMS="base:AB_BIN=/tmp/fuselm-base relaxed:AB_BIN=/tmp/fuselm-relaxed stasync:AB_BIN=/tmp/fuselm-stasync"
timeout 150 bash scripts/gpu-ab.sh llama-3.2-1b 3 $ARMS -- $LAT 2>&1 | grep -v "^=="
timeout 100 bash scripts/gpu-ab.sh llama-3.1-8b 2 $ARMS -- $LAT 2>&1 | grep -v "^==" | grep -v 1b-
ARMS16="base16:AB_BIN=/tmp/fuselm-base relaxed16:AB_BIN=/tmp/fuselm-relaxed stasync16:AB_BIN=/tmp/fuselm-stasync"
timeout 130 bash scripts/gpu-ab.sh llama-3.1-8b 2 $ARMS16 -- --device cuda --dtype bf16 \
    --scenario throughput --batches 16 --reps 2 2>&1 | grep -v "^==" | grep 16-
echo "A/B $((SECONDS-start)) s"
mkdir -p $OUT/s28b && cp bench/results/dev/ab/*.json $OUT/s28b/ 2>/dev/null
(cd $OUT && tar czf s28b.tgz s28b && rm -rf s28b)
echo "total $((SECONDS-start)) s"
