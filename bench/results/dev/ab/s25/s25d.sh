#!/usr/bin/env bash
# Session 25, second call: after s25b (weight stages before the wait: 2 of 4 gave 8B batch 16
# +1.5%, one-token shapes even or slower), the CTA pipeline's weight copies by its producer lanes.
# s25d.patch (on s25b.patch; lab switches for the experiment only): FUSELM_LAB_CTA_LSU=1 copies the
# weights of row-tile-by-row-tile CTAs with 16-byte cp.async from the producer warp's 32 lanes
# instead of one bulk copy a row tile (2 KB at 4 row tiles a CTA), =2 also those of tile groups
# (7-8 KB copies); the stage's barrier then counts the lanes' cp.async arrivals alone.
# Why: the read-order probe (docs/kernels/skinny_gemm.md, session 16) streamed the same bytes at
# 3.93 TB/s in 1 KB bulk copies, 4.13 in 8 KB ones and 4.15-4.27 with 16-byte loads; the 8B
# batch-16 K loops stream at ~3.9 TB/s (down: 117 MB in 30 us) against ~4.5 for the one-token
# warp pipeline's 16-byte cp.async. Predicted: 8B batch 16 +2-4% (qkv/o/down K loops 5-10%
# shorter); 1B batch 1 +0-1% (its gate/up takes 2 KB copies); 8B batch 1 with LSU=2 even.
# Also: which lab switch of s25b made the skinny GEMM test fail with an illegal instruction.
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s25/s25d.sh
set -uo pipefail
start=$SECONDS
export FUSELM_COMMIT=$(cat .commit 2>/dev/null || echo unknown)
P=bench/results/dev/ab/s25
patch -p1 < $P/s25b.patch > /dev/null || exit 1
patch -p1 < $P/s25d.patch > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm gpu_skinny_gemm_test gpu_fused_engine_test || exit 1
T=build-gpu/tests/gpu_skinny_gemm_test
for e in FUSELM_LAB_CTA_PREWAIT=1 FUSELM_LAB_WARP_LATE=1 FUSELM_LAB_CTA_PREWAIT=2 FUSELM_LAB_CTA_LSU=2; do
  echo "== StoreMatchesReference with $e: $(env $e timeout 60 $T --gtest_filter='*StoreMatchesReferenceForEveryVariantAndBatch' 2>&1 |
      grep -E '^\[  (FAILED|PASSED) ' | head -1)"
done
for t in skinny_gemm fused_engine; do
  echo "== $t (CTA LSU 2, prewait 2)"
  FUSELM_LAB_CTA_PREWAIT=2 FUSELM_LAB_CTA_LSU=2 timeout 200 build-gpu/tests/gpu_${t}_test 2>&1 |
      grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
done
echo "build and tests $((SECONDS-start)) s"
rm -f bench/results/dev/ab/*.json
B16="--device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2"
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
timeout 240 bash scripts/gpu-ab.sh llama-3.1-8b 3 base16 c2x16:FUSELM_LAB_CTA_PREWAIT=2 c3x16:FUSELM_LAB_CTA_PREWAIT=3 \
    l1c2x16:FUSELM_LAB_CTA_PREWAIT=2,FUSELM_LAB_CTA_LSU=1 l2c2x16:FUSELM_LAB_CTA_PREWAIT=2,FUSELM_LAB_CTA_LSU=2 \
    l2x16:FUSELM_LAB_CTA_LSU=2 -- $B16 2>&1 | grep -v "^=="
timeout 200 bash scripts/gpu-ab.sh llama-3.2-1b 3 base l1:FUSELM_LAB_CTA_LSU=1 l2:FUSELM_LAB_CTA_LSU=2 -- $LAT 2>&1 |
    grep -v "^=="
timeout 200 bash scripts/gpu-ab.sh llama-3.2-1b 2 base16 c2x16:FUSELM_LAB_CTA_PREWAIT=2 \
    l2c2x16:FUSELM_LAB_CTA_PREWAIT=2,FUSELM_LAB_CTA_LSU=2 -- $B16 2>&1 | grep -v "^==" | grep x16
timeout 200 bash scripts/gpu-ab.sh llama-3.1-8b 2 base l1:FUSELM_LAB_CTA_LSU=1 l2:FUSELM_LAB_CTA_LSU=2 -- $LAT 2>&1 |
    grep -v "^==" | grep -v x16
echo "A/B $((SECONDS-start)) s"
mkdir -p $OUT/s25d && cp bench/results/dev/ab/*.json $OUT/s25d/ 2>/dev/null
(cd $OUT && tar czf s25d.tgz s25d && rm -rf s25d)
echo "total $((SECONDS-start)) s"
