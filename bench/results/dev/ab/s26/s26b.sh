#!/usr/bin/env bash
# s26b: the GEMM epilogues' operands that no earlier kernel writes, read before griddepcontrol.wait
# (s26b.patch: QkvRopeEpilogue::prepare reads the positions and block numbers and computes the
# rotation's cos/sin before the wait; ResidualEpilogue::prepare reads the next norm's gains).
# Why: the QKV epilogue looked up each K/V row's cache block after the K loop (positions ->
# block table: two dependent round trips) and ran sincosf per token slot there, on the kernel's
# tail (1B batch 1: 0.94 us from the last CTA's epilogue start to its end; 8B batch 16: 3.0 us).
# Predicted: 1B batch 1 +0.5-1%, 8B batch 16 +0.3-1%, 8B batch 1 +0-0.3%.
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s26/s26b.sh
set -uo pipefail
start=$SECONDS
export FUSELM_COMMIT=$(cat .commit 2>/dev/null || echo unknown)
P=bench/results/dev/ab/s26/s26b.patch
patch -R -p1 < $P > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm || exit 1
cp build-gpu/fuselm /tmp/fuselm-base
patch -p1 < $P > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm gpu_skinny_gemm_test gpu_skinny_ffn_test gpu_fused_engine_test gpu_fused_decode_test \
    gpu_decode_timeline_test || exit 1
for t in skinny_gemm skinny_ffn fused_engine fused_decode; do
  echo "== $t"
  timeout 200 build-gpu/tests/gpu_${t}_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
done
echo "build and tests $((SECONDS-start)) s"
bash scripts/gpu-timeline.sh $OUT/s26b-timeline.txt
echo "timeline $((SECONDS-start)) s"
rm -f bench/results/dev/ab/*.json
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
timeout 150 bash scripts/gpu-ab.sh llama-3.2-1b 3 base:AB_BIN=/tmp/fuselm-base early -- $LAT 2>&1 | grep -v "^=="
timeout 120 bash scripts/gpu-ab.sh llama-3.1-8b 2 base:AB_BIN=/tmp/fuselm-base early -- $LAT 2>&1 | grep -v "^=="
timeout 150 bash scripts/gpu-ab.sh llama-3.1-8b 3 base16:AB_BIN=/tmp/fuselm-base early16 -- --device cuda --dtype bf16 \
    --scenario throughput --batches 16 --reps 2 2>&1 | grep -v "^=="
echo "A/B $((SECONDS-start)) s"
mkdir -p $OUT/s26b && cp bench/results/dev/ab/*.json $OUT/s26b/ 2>/dev/null
(cd $OUT && tar czf s26b.tgz s26b && rm -rf s26b)
echo "total $((SECONDS-start)) s"
