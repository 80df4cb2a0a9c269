#!/usr/bin/env bash
# s26d: the QKV epilogue's lookups before the wait at 9-16 tokens only (s26d.patch, against 633a38a):
# s26b (all before the wait) and s26c (positions before, lookups right after) won 0.6-0.8% at 8B
# batch 16 but lost at one token (s26b 1B -0.5%: the late CTAs' release; s26c 1B -1.7%, 8B -0.8%:
# the warp pipeline's K loop start). One token keeps 633a38a's placement (the positions after the
# wait, the block lookup and sincosf in the tail). The residual epilogue's gains go before the wait
# at every token count (s26b: 8B batch 1 even). Then the headline on this code.
# Predicted: 8B batch 16 +0.5-0.8%, batch 1 even.
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s26/s26d.sh
set -uo pipefail
start=$SECONDS
export FUSELM_COMMIT=$(cat .commit 2>/dev/null || echo unknown)
P=bench/results/dev/ab/s26/s26d.patch
patch -R -p1 < $P > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm || exit 1
cp build-gpu/fuselm /tmp/fuselm-base
patch -p1 < $P > /dev/null || exit 1
FUSELM_HEADLINE_TESTS=1 bash scripts/gpu-headline.sh
echo "headline $((SECONDS-start)) s"
rm -f bench/results/dev/ab/*.json
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
timeout 150 bash scripts/gpu-ab.sh llama-3.2-1b 3 base:AB_BIN=/tmp/fuselm-base early -- $LAT 2>&1 | grep -v "^=="
timeout 150 bash scripts/gpu-ab.sh llama-3.1-8b 3 base16:AB_BIN=/tmp/fuselm-base early16 -- --device cuda --dtype bf16 \
    --scenario throughput --batches 16 --reps 2 2>&1 | grep -v "^==" | grep 16-
timeout 120 bash scripts/gpu-ab.sh llama-3.1-8b 2 base:AB_BIN=/tmp/fuselm-base early -- $LAT 2>&1 | grep -v "^==" | grep -v 16-
echo "A/B $((SECONDS-start)) s"
mkdir -p $OUT/s26d && cp bench/results/dev/ab/*.json $OUT/s26d/ 2>/dev/null
(cd $OUT && tar czf s26d.tgz s26d && rm -rf s26d)
echo "total $((SECONDS-start)) s"
