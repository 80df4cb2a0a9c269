#!/usr/bin/env bash
# Prepared in session 27 for the next session's first device call (~7-8 min).
# 1. The latency probe with its barrier cases (bench/lab/latency_under_stream.cu): what a cluster's
#    hand-off through shared memory costs with a releasing arrive (cluster_barrier(): ptxas puts a
#    MEMBAR.ALL.GPU before it), a relaxed one, a cluster fence, a GPU fence, with and without a
#    global store before, idle and under a 3.6 TB/s stream. The decode merge and every K-split
#    epilogue of the skinny GEMM cross such a barrier; if the releasing arrive costs ~0.5 us under
#    the stream, a cheaper hand-off (st.async into the reader's shared memory with an mbarrier's
#    transaction count, or a cluster fence) is worth ~0.5 us a kernel.
# 2. reset-after-barrier.patch: in clusters, the CTA with the launch's last claim resets the claim
#    counter after the merge's first cluster barrier instead of before it (the releasing arrive waited
#    for the reset's round trip, and the whole cluster with it). Predicted 1B batch 1 +0-0.5%.
# 3. exit-lengths-cumulative.patch (2. plus this): at the exit, a CTA numbered below the batch takes
#    its sequence's length from the warp's window (a shuffle) instead of loading it, while one window
#    holds the batch (the load was the last round trip before those CTAs left). The head-dim-128
#    split kernel goes from 240/244 to 246/252 registers (no spill; still two CTAs an SM).
#    Predicted 1B batch 1 +0-0.3%.
# 4. The relaxed bound is the second call, s28b.sh.
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s28-prep/s28a.sh
set -uo pipefail
start=$SECONDS
export FUSELM_COMMIT=$(cat .commit 2>/dev/null || echo unknown)
D=bench/results/dev/ab/s28-prep
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a bench/lab/latency_under_stream.cu -o /tmp/lus &&
    /tmp/lus > $OUT/latency-under-stream-barriers.txt 2>&1
grep -A100 "barrier case" $OUT/latency-under-stream-barriers.txt | head -40
# What each barrier kind compiles to (the barrier_cost kernel's SASS).
cuobjdump -sass /tmp/lus | awk '/Function : /{on = /barrier_cost/} on' | grep -E "MEMBAR|UCGABAR|FENCE|CCTL|BAR|ERRBAR" |
    sed -E 's/^\s+\/\*[0-9a-f]+\*\/\s+//; s/;.*//' | tee $OUT/barrier-cost-sass.txt
echo "probe $((SECONDS-start)) s"
bash scripts/gpu-build.sh fuselm || exit 1
cp build-gpu/fuselm /tmp/fuselm-base
patch -p1 < $D/reset-after-barrier.patch > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm || exit 1
cp build-gpu/fuselm /tmp/fuselm-after
patch -R -p1 < $D/reset-after-barrier.patch > /dev/null || exit 1
patch -p1 < $D/exit-lengths-cumulative.patch > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm gpu_attention_test gpu_fused_engine_test gpu_fused_decode_test || exit 1
for t in fused_engine fused_decode; do
  echo "== $t"
  timeout 100 build-gpu/tests/gpu_${t}_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
done
echo "== attention (decode)"
timeout 150 build-gpu/tests/gpu_attention_test --gtest_filter='*Decode*:AttentionSmall.*' 2>&1 |
    grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
echo "build and tests $((SECONDS-start)) s"
cp build-gpu/fuselm /tmp/fuselm-lengths
patch -R -p1 < $D/exit-lengths-cumulative.patch > /dev/null || exit 1
rm -f bench/results/dev/ab/*.json
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
ARMS="base:AB_BIN=/tmp/fuselm-base after:AB_BIN=/tmp/fuselm-after lengths:AB_BIN=/tmp/fuselm-lengths"
timeout 200 bash scripts/gpu-ab.sh llama-3.2-1b 3 $ARMS -- $LAT 2>&1 | grep -v "^=="
timeout 150 bash scripts/gpu-ab.sh llama-3.1-8b 2 $ARMS -- $LAT 2>&1 | grep -v "^==" | grep -v 1b-
echo "A/B $((SECONDS-start)) s"
mkdir -p $OUT/s28a && cp bench/results/dev/ab/*.json $OUT/s28a/ 2>/dev/null
(cd $OUT && tar czf s28a.tgz s28a && rm -rf s28a)
echo "total $((SECONDS-start)) s"
