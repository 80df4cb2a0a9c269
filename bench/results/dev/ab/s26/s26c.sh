#!/usr/bin/env bash
# s26c: s26b revised (s26c.patch, against HEAD 633a38a). s26b read the QKV epilogue's positions and
# block numbers and ran its sincosf calls before griddepcontrol.wait: 8B batch 16 +0.8%, but 1B
# batch 1 -0.5%, its QKV projection's last CTA released 2.9 us later (the chain ran past the wait).
# Now only independent loads go before the wait (positions, frequencies, the next norm's gains);
# the block lookup and sincosf follow the wait, while the first stage is in flight, and the tail
# keeps only the rotation and the stores.
# Predicted: 1B batch 1 +0.3-1%, 8B batch 16 +0.5-1%, 8B batch 1 even.
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s26/s26c.sh
set -uo pipefail
start=$SECONDS
export FUSELM_COMMIT=$(cat .commit 2>/dev/null || echo unknown)
P=bench/results/dev/ab/s26/s26c.patch
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
bash scripts/gpu-timeline.sh $OUT/s26c-timeline.txt
echo "timeline $((SECONDS-start)) s"
rm -f bench/results/dev/ab/*.json
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
timeout 150 bash scripts/gpu-ab.sh llama-3.2-1b 3 base:AB_BIN=/tmp/fuselm-base early -- $LAT 2>&1 | grep -v "^=="
timeout 150 bash scripts/gpu-ab.sh llama-3.1-8b 3 base16:AB_BIN=/tmp/fuselm-base early16 -- --device cuda --dtype bf16 \
    --scenario throughput --batches 16 --reps 2 2>&1 | grep -v "^==" | grep 16-
timeout 120 bash scripts/gpu-ab.sh llama-3.1-8b 2 base:AB_BIN=/tmp/fuselm-base early -- $LAT 2>&1 | grep -v "^==" | grep -v 16-
echo "A/B $((SECONDS-start)) s"
mkdir -p $OUT/s26c && cp bench/results/dev/ab/*.json $OUT/s26c/ 2>/dev/null
(cd $OUT && tar czf s26c.tgz s26c && rm -rf s26c)
echo "total $((SECONDS-start)) s"
