#!/usr/bin/env bash
# Session 23 (b): one kernel instance for a layer's QKV, O and down projections. The QKV and the
# residual epilogues become one type chosen at run time (LayerEpilogue), and the warp pipeline's
# ring depth a kernel argument instead of a template one, so that on the 1B shape at one token the
# three projections (all rt1_w8; down on the deep ring) run one function instead of three, and on
# the 8B shape O and down one instead of two. Hypothesis: a layer's kernels are larger than the
# SM's instruction cache, so each kernel's code comes from L2 every layer (session 22: 6-7 KB less
# code a GEMM instance gave the 1B step +1.9%; s23a: a few instructions more on the path after
# the wait cost it 2.3%). Prediction: 1B +1-3% at batch 1, 8B +0-1%; batch 16 even. Same bits.
# Builds the tree as it is, runs the skinny GEMM and fused-engine tests and the timeline, then
# builds 7af05ef's skinny GEMM sources (s23b-before.tgz) and compares the two binaries in turns.
set -uo pipefail
start=$SECONDS
bash scripts/gpu-build.sh fuselm gpu_skinny_gemm_test gpu_fused_engine_test gpu_decode_timeline_test || exit 1
cp build-gpu/fuselm /tmp/fuselm-shared
obj=$(find build-gpu -name 'skinny_gemm_layer.cu.o' | head -1)
cuobjdump -sass "$obj" | gzip > $OUT/s23b-layer.sass.gz
timeout 150 build-gpu/tests/gpu_skinny_gemm_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
timeout 200 build-gpu/tests/gpu_fused_engine_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
echo "tests $((SECONDS-start)) s"
timeout 120 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 |
    grep "^\[bench\]" > $OUT/s23b-timeline.txt
grep -v -e "us after" -e "CTAs an SM" $OUT/s23b-timeline.txt | awk '{print $2,$3,$4,$6,$8,$9,$10,$11,$15,$16,$17}' | head -24
tail -4 $OUT/s23b-timeline.txt
echo "timeline $((SECONDS-start)) s"
rm -f src/kernels/cuda/skinny_gemm_layer.cu && tar xzf bench/results/dev/ab/s23/s23b-before.tgz || exit 1
bash scripts/gpu-build.sh fuselm || exit 1
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
timeout 150 bash scripts/gpu-ab.sh llama-3.2-1b 3 before shared:AB_BIN=/tmp/fuselm-shared -- $LAT 2>&1 | grep -v "^=="
timeout 150 bash scripts/gpu-ab.sh llama-3.1-8b 2 before shared:AB_BIN=/tmp/fuselm-shared -- $LAT 2>&1 | grep -v "^=="
timeout 150 bash scripts/gpu-ab.sh llama-3.1-8b 2 before shared:AB_BIN=/tmp/fuselm-shared -- --device cuda --dtype bf16 \
    --scenario throughput --batches 16 --reps 2 --no-peak 2>&1 | grep -v "^=="
mkdir -p $OUT/s23b && cp bench/results/dev/ab/*.json $OUT/s23b/ 2>/dev/null
(cd $OUT && tar czf s23b.tgz s23b && rm -rf s23b)
echo "total $((SECONDS-start)) s"
