#!/usr/bin/env bash
# s24b: decode attention's K/V issue from per-thread bases (issue_kv_rows), and the QKV epilogue's
# cache-block lookups issued once the first stage has landed (load_dependent) instead of after the
# K loop. Both keep the bits.
# Why: in the s24a timeline the 1B attention's last CTA took 1.12 us (8B: 1.96) from its block
# numbers staged to its K/V prologue issued, before its wait; the QKV projection spent 0.94 us from
# its epilogue's start to its end against 0.51 for the O projection, whose operands all come before
# the K loop.
# Prediction: 1B batch 1 +0.5-1.5% (attention's release earlier by up to 0.5 us a layer), 8B
# +0.3-1%, 8B batch 16 +0-1% (the stacked kernel issues a stage per key step).
# Usage (on the GPU machine, carry .deps .gpu-models): OUT=$OUT bash bench/results/dev/ab/s24/s24b.sh
set -uo pipefail
start=$SECONDS
patch -R -p1 < bench/results/dev/ab/s24/s24b.patch > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm || exit 1
cp build-gpu/fuselm /tmp/fuselm-base
patch -p1 < bench/results/dev/ab/s24/s24b.patch > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm gpu_skinny_gemm_test gpu_fused_engine_test gpu_fused_decode_test gpu_attention_test \
    gpu_decode_timeline_test || exit 1
for t in skinny_gemm fused_engine fused_decode attention; do
  echo "== $t"
  timeout 200 build-gpu/tests/gpu_${t}_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
done
echo "tests $((SECONDS-start)) s"
bash scripts/gpu-timeline.sh $OUT/s24b-timeline.txt
echo "timeline $((SECONDS-start)) s"
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
timeout 150 bash scripts/gpu-ab.sh llama-3.2-1b 3 base:AB_BIN=/tmp/fuselm-base new -- $LAT 2>&1 | grep -v "^=="
timeout 150 bash scripts/gpu-ab.sh llama-3.1-8b 2 base:AB_BIN=/tmp/fuselm-base new -- $LAT 2>&1 | grep -v "^=="
timeout 150 bash scripts/gpu-ab.sh llama-3.1-8b 2 base:AB_BIN=/tmp/fuselm-base new -- --device cuda --dtype bf16 \
    --scenario throughput --batches 16 --reps 2 --no-peak 2>&1 | grep -v "^=="
mkdir -p $OUT/s24b && cp bench/results/dev/ab/*.json $OUT/s24b/ 2>/dev/null
(cd $OUT && tar czf s24b.tgz s24b && rm -rf s24b)
echo "total $((SECONDS-start)) s"
