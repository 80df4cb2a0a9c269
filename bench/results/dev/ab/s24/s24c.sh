#!/usr/bin/env bash
# s24c (plan edits, no code): the 8B O and down projections in the k4 rounding class instead of k8.
# Why: at 16 tokens their rt1_w4_k8_cta grids (512 CTAs in clusters of 8) cannot fit one wave at
# four an SM and run five on 70-86 SMs; the s24b timeline has them 6.9 (o) and 9.7 (down) us over
# their floors a layer at batch 16. In k4 the batch-16 grid is 256 CTAs in clusters of 4 (or 128 of
# 8 warps), and the one-token variant of the class is rt1_w4 (the 8B QKV projection's).
# Prediction: 8B batch-16 decode steps +2-5%; 8B batch 1 -1 to +1% (rt1_w4 keeps half the weight
# stages in flight an SM that rt1_w8 does).
# Usage (on the GPU machine, carry .deps .gpu-models): OUT=$OUT bash bench/results/dev/ab/s24/s24c.sh
set -uo pipefail
start=$SECONDS
bash scripts/gpu-build.sh fuselm || exit 1
rm -f bench/results/dev/ab/*.json
P=plan:decode.gemm
K4OD="$P.o.variant=rt1_w4_k4_cta,$P.o.single_token_variant=rt1_w4,$P.down.variant=rt1_w4_k4_cta,$P.down.single_token_variant=rt1_w4"
K4D="$P.down.variant=rt1_w4_k4_cta,$P.down.single_token_variant=rt1_w4"
W8K4OD="$P.o.variant=rt1_w8_k4_cta,$P.o.single_token_variant=rt1_w4,$P.down.variant=rt1_w8_k4_cta,$P.down.single_token_variant=rt1_w4"
timeout 200 bash scripts/gpu-ab.sh llama-3.1-8b 2 rules k4od:$K4OD k4d:$K4D w8k4od:$W8K4OD -- --device cuda \
    --dtype bf16 --scenario latency --reps 2 2>&1 | grep -v "^=="
timeout 200 bash scripts/gpu-ab.sh llama-3.1-8b 2 rules16 k4od16:$K4OD k4d16:$K4D w8k4od16:$W8K4OD -- --device cuda \
    --dtype bf16 --scenario throughput --batches 16 --reps 2 2>&1 | grep -v "^==" | grep "16-\|^run"
mkdir -p $OUT/s24c && cp bench/results/dev/ab/*.json $OUT/s24c/ 2>/dev/null
(cd $OUT && tar czf s24c.tgz s24c && rm -rf s24c)
echo "total $((SECONDS-start)) s"
