#!/usr/bin/env bash
# Prepared in session 23 for the next session's first device call (the session's device time was
# spent): the warp pipeline's K loop with its copies planned once (lean-k-loop.patch).
# Why: the s23b SASS of the one-token rt1_w8 GEMM spends ~200 instructions a stage (4 k-tiles:
# 4 weight copies, 1 activation copy, 4 mma): each copy's 64-bit index recomputed and bounds-checked,
# and its shared address converted from a generic pointer (S2UR SR_CgaCtaId + ULEA per copy). At two
# warps a scheduler (8-warp CTAs, one or two an SM) that is ~6,400 issue cycles a scheduler for the
# 1B down projection's 16 stages a warp, ~3.4 us at one instruction a cycle, against a K loop of
# 7.0 us that streams at ~2.7 TB/s; the 1B decode graph issues at 0.36 instructions a cycle a
# scheduler with "wait" (fixed-latency dependencies) the largest stall (s23d). The patch keeps
# every copy and mma (same bits) with 32-bit per-lane bases plus a stage offset.
# Prediction: 1B batch 1 +2-4% (the down projection's K loop -1 to -2 us, QKV and O -0.3 each), 8B
# +0-0.5% (its loops are DRAM-bound), batch 16 even (the CTA pipeline runs it).
# Usage (on the GPU machine, carry .deps .commit .gpu-models):
#   OUT=$OUT bash bench/results/dev/ab/s24/s24a.sh
set -uo pipefail
start=$SECONDS
bash scripts/gpu-build.sh fuselm || exit 1
cp build-gpu/fuselm /tmp/fuselm-base
patch -p1 < bench/results/dev/ab/s24/s24a.patch > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm gpu_skinny_gemm_test gpu_fused_engine_test gpu_decode_timeline_test || exit 1
timeout 150 build-gpu/tests/gpu_skinny_gemm_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
timeout 200 build-gpu/tests/gpu_fused_engine_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
echo "tests $((SECONDS-start)) s"
bash scripts/gpu-timeline.sh $OUT/s24a-timeline.txt
echo "timeline $((SECONDS-start)) s"
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
timeout 150 bash scripts/gpu-ab.sh llama-3.2-1b 3 base:AB_BIN=/tmp/fuselm-base lean -- $LAT 2>&1 | grep -v "^=="
timeout 150 bash scripts/gpu-ab.sh llama-3.1-8b 2 base:AB_BIN=/tmp/fuselm-base lean -- $LAT 2>&1 | grep -v "^=="
timeout 150 bash scripts/gpu-ab.sh llama-3.1-8b 2 base:AB_BIN=/tmp/fuselm-base lean -- --device cuda --dtype bf16 \
    --scenario throughput --batches 16 --reps 2 --no-peak 2>&1 | grep -v "^=="
# Session 23 saw `--compare` read the fused path ~0.6% below a run of it alone (the engines alive
# together, repetitions alternating; the first engine made takes 45% of the free memory for its KV
# cache, the second 80% of the rest). Both orders on the lean build: if the fused rate follows the
# order, the engines' creation (memory) is the cause; if not, the alternation.
model="synthetic:llama-3.2-1b?vocab=32000"
for order in baseline,fused fused,baseline; do
  timeout 100 build-gpu/fuselm bench -m "$model" --device cuda --dtype bf16 --scenario latency --compare $order \
      --reps 3 -q --json $OUT/s24a-compare-${order/,/-}.json > /tmp/cmp.txt 2>&1 || tail -5 /tmp/cmp.txt
  python3 -c "
import json; c=json.load(open('$OUT/s24a-compare-${order/,/-}.json'))['compare']
print('$order fused', round(c['fused']['scenarios']['latency']['decode_tok_s'],1), 'baseline',
      round(c['baseline']['scenarios']['latency']['decode_tok_s'],1))"
done
mkdir -p $OUT/s24a && cp bench/results/dev/ab/*.json $OUT/s24a/ 2>/dev/null
(cd $OUT && tar czf s24a.tgz s24a && rm -rf s24a)
echo "total $((SECONDS-start)) s"
