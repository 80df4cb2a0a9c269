#!/usr/bin/env bash
# Session 25, two experiments on the GEMMs' first stage after griddepcontrol.wait.
# s25b.patch (a lab switch for the experiment only): FUSELM_LAB_CTA_PREWAIT=N, the CTA pipeline's
#   weight stages issued before the wait (default all); FUSELM_LAB_WARP_LATE=1, the warp pipeline's
#   first stage only, then after the wait the prologue's activations before its other weight stages.
#   Why: after the wait every GEMM's first stage lands ~3-3.7 us after its release at 16 tokens
#   (CTA pipeline, 128-160 KB of weights issued an SM before the wait) and ~1.2-2 us at one token
#   (warp pipeline, ~48-96 KB an SM); if the activation copies queue behind the SM's weight copies,
#   that wait is the SM's prefetch over its share of the bandwidth (128 KB / 34 GB/s = 3.8 us), and
#   the ring sits full and idle while it lasts. Predicted: 8B batch 16 +2-4% with 1-2 stages before
#   the wait, 1B batch 1 +0-2%; if wrong, even or slower (DRAM idles across the boundary).
# s25c.patch (on s25b): the folded norm's 1/rms at 9-16 tokens with every token's partial sums
#   loaded before the first add (one round trip a warp instead of one a token: 4 a warp on the QKV
#   projection's 4-warp CTAs, 3 on gate/up's 7; same adds, same bits). Predicted: 8B batch 16
#   +1-2% if that chain, not the activations, holds the QKV and gate/up K loops' start.
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s25/s25b.sh
set -uo pipefail
start=$SECONDS
export FUSELM_COMMIT=$(cat .commit 2>/dev/null || echo unknown)
P=bench/results/dev/ab/s25
patch -p1 < $P/s25b.patch > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm || exit 1
cp build-gpu/fuselm /tmp/fuselm-b
patch -p1 < $P/s25c.patch > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm gpu_skinny_gemm_test gpu_fused_engine_test gpu_decode_timeline_test || exit 1
for t in skinny_gemm fused_engine; do
  echo "== $t (s25c, CTA prewait 1, warp late)"
  FUSELM_LAB_CTA_PREWAIT=1 FUSELM_LAB_WARP_LATE=1 timeout 200 build-gpu/tests/gpu_${t}_test 2>&1 |
      grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
done
echo "builds and tests $((SECONDS-start)) s"
rm -f bench/results/dev/ab/*.json
B=AB_BIN=/tmp/fuselm-b
B16="--device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2"
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
timeout 240 bash scripts/gpu-ab.sh llama-3.1-8b 3 base16:$B c1x16:$B,FUSELM_LAB_CTA_PREWAIT=1 \
    c2x16:$B,FUSELM_LAB_CTA_PREWAIT=2 n16 nc1x16:FUSELM_LAB_CTA_PREWAIT=1 nc2x16:FUSELM_LAB_CTA_PREWAIT=2 \
    -- $B16 2>&1 | grep -v "^=="
timeout 200 bash scripts/gpu-ab.sh llama-3.2-1b 3 base:$B c1:$B,FUSELM_LAB_CTA_PREWAIT=1 c2:$B,FUSELM_LAB_CTA_PREWAIT=2 \
    w1:$B,FUSELM_LAB_WARP_LATE=1 c1w1:$B,FUSELM_LAB_CTA_PREWAIT=1,FUSELM_LAB_WARP_LATE=1 -- $LAT 2>&1 | grep -v "^=="
timeout 200 bash scripts/gpu-ab.sh llama-3.1-8b 2 base:$B c1:$B,FUSELM_LAB_CTA_PREWAIT=1 c2:$B,FUSELM_LAB_CTA_PREWAIT=2 \
    w1:$B,FUSELM_LAB_WARP_LATE=1 c1w1:$B,FUSELM_LAB_CTA_PREWAIT=1,FUSELM_LAB_WARP_LATE=1 -- $LAT 2>&1 | grep -v "^=="
echo "A/B $((SECONDS-start)) s"
FUSELM_LAB_CTA_PREWAIT=1 bash scripts/gpu-timeline.sh $OUT/s25c-timeline-c1.txt
mkdir -p $OUT/s25b && cp bench/results/dev/ab/*.json $OUT/s25b/ 2>/dev/null
(cd $OUT && tar czf s25b.tgz s25b && rm -rf s25b)
echo "total $((SECONDS-start)) s"
