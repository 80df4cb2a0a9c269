#!/usr/bin/env bash
# Session 22 (c): code size on the GEMMs' path after the wait. The activation staging loop
# (stage_activation_columns, which every pipeline's prologue runs right after the wait and the warp
# pipeline once a stage) was unrolled four times by the compiler; rolled, the one-token warp-pipeline
# GEMMs shrink from 35.8 / 42.9 / 33.0 KB (o and down / qkv / -) to 28.7 / 36.6 / 27.1 and the CTA
# pipeline's gate/up from 36.9 to 29.7 KB (sm_90a cubin .text sizes). Session 11 measured ~1.6 us
# less from the 1B O projection's release to its first stage when its prologue loops were rolled.
# Prediction: +0.5-2% at batch 1 (1B more than 8B), same bits.
# Builds the tree as it is (rolled), then with s22c-rolled.patch reversed (as before), and compares
# the two binaries in turns; the skinny GEMM tests and the timeline run on the rolled build.
set -uo pipefail
start=$SECONDS
bash scripts/gpu-build.sh fuselm gpu_skinny_gemm_test gpu_decode_timeline_test || exit 1
cp build-gpu/fuselm /tmp/fuselm-rolled
timeout 150 build-gpu/tests/gpu_skinny_gemm_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
echo "tests $((SECONDS-start)) s"
timeout 120 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 |
    grep "^\[bench\]" > $OUT/s22c-timeline.txt
grep -v -e "us after" -e "CTAs an SM" $OUT/s22c-timeline.txt | awk '{print $2,$3,$4,$6,$8,$9,$10,$11,$15,$16,$17}' | head -24
echo "timeline $((SECONDS-start)) s"
patch -R -p1 < bench/results/dev/ab/s22/s22c-rolled.patch > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm || exit 1
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
timeout 150 bash scripts/gpu-ab.sh llama-3.2-1b 3 unrolled rolled:AB_BIN=/tmp/fuselm-rolled -- $LAT 2>&1 | grep -v "^=="
timeout 150 bash scripts/gpu-ab.sh llama-3.1-8b 2 unrolled rolled:AB_BIN=/tmp/fuselm-rolled -- $LAT 2>&1 | grep -v "^=="
mkdir -p $OUT/s22c && cp bench/results/dev/ab/*.json $OUT/s22c/ 2>/dev/null
(cd $OUT && tar czf s22c.tgz s22c && rm -rf s22c)
echo "total $((SECONDS-start)) s"
