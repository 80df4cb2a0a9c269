#!/usr/bin/env bash
# Session 23 (a): the folded norm's partial sums added after the K loop. A warp that finishes a
# token's 1/rms (warp w takes token w) waited for the partials' round trip before its K loop; with
# m <= warps the loads now go out right after the wait and are added after the loop (same bits).
# In the 7af05ef timeline the 1B QKV projection's first stage lands 3.3 us after its release (the
# O projection's, which has no norm, 1.5 us). Prediction: the QKV projection and the gate/up
# projection (the two GEMMs with a norm) 0.3-1 us shorter a layer each at batch 1: 1B +1-3%, 8B
# +0.5-1%; batch 16 unchanged (m > warps keeps the old path).
# Builds the tree as it is, runs the skinny GEMM and fused-engine tests and the timeline on it, then
# builds with s23a.patch reversed (7af05ef's code) and compares the two binaries in turns.
set -uo pipefail
start=$SECONDS
bash scripts/gpu-build.sh fuselm gpu_skinny_gemm_test gpu_fused_engine_test gpu_decode_timeline_test || exit 1
cp build-gpu/fuselm /tmp/fuselm-deferred
timeout 150 build-gpu/tests/gpu_skinny_gemm_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
timeout 200 build-gpu/tests/gpu_fused_engine_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
echo "tests $((SECONDS-start)) s"
timeout 120 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 |
    grep "^\[bench\]" > $OUT/s23a-timeline.txt
grep -v -e "us after" -e "CTAs an SM" $OUT/s23a-timeline.txt | awk '{print $2,$3,$4,$6,$8,$9,$10,$11,$15,$16,$17}' | head -24
echo "timeline $((SECONDS-start)) s"
patch -R -p1 < bench/results/dev/ab/s23/s23a.patch > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm || exit 1
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
timeout 150 bash scripts/gpu-ab.sh llama-3.2-1b 3 before deferred:AB_BIN=/tmp/fuselm-deferred -- $LAT 2>&1 | grep -v "^=="
timeout 150 bash scripts/gpu-ab.sh llama-3.1-8b 2 before deferred:AB_BIN=/tmp/fuselm-deferred -- $LAT 2>&1 | grep -v "^=="
mkdir -p $OUT/s23a && cp bench/results/dev/ab/*.json $OUT/s23a/ 2>/dev/null
(cd $OUT && tar czf s23a.tgz s23a && rm -rf s23a)
echo "total $((SECONDS-start)) s"
