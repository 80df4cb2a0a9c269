#!/usr/bin/env bash
# s24d (plan edits, no code): the 8B batch-16 step's O, down and QKV projections on the warp
# pipeline, in their rounding classes (the one-token variants, and so batch 1, unchanged).
# Why: at batch 1 these projections stream at ~97% of 4.2 TB/s on the warp pipeline (s24b timeline:
# 107.8 us a layer for 436 MB); at 16 tokens on the CTA pipeline (rt1_w4_k8_cta, rt1_w4_k4_cta)
# they take 131.7 us, and s24c showed fewer, larger CTAs lose more. Since s24a the warp pipeline's
# copies are planned once per K loop, and at RT=4 a lane copies one activation chunk a stage at 16
# tokens (the lean path); session 13 ranked these variants before that change.
# Prediction: rt4_w8 for o/down +1-3% on batch-16 decode steps, the others even or worse.
# Usage (on the GPU machine, carry .deps .gpu-models): OUT=$OUT bash bench/results/dev/ab/s24/s24d.sh
set -uo pipefail
start=$SECONDS
bash scripts/gpu-build.sh fuselm || exit 1
rm -f bench/results/dev/ab/*.json
P=plan:decode.gemm
timeout 300 bash scripts/gpu-ab.sh llama-3.1-8b 2 rules16 \
    d_rt4w8:$P.down.variant=rt4_w8 \
    od_rt4w8:$P.o.variant=rt4_w8,$P.down.variant=rt4_w8 \
    od_rt2w8:$P.o.variant=rt2_w8,$P.down.variant=rt2_w8 \
    od_rt1w8:$P.o.variant=rt1_w8,$P.down.variant=rt1_w8 \
    q_rt4w4:$P.qkv.variant=rt4_w4 \
    q_rt2w4:$P.qkv.variant=rt2_w4 \
    -- --device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2 2>&1 | grep -v "^=="
mkdir -p $OUT/s24d && cp bench/results/dev/ab/*.json $OUT/s24d/ 2>/dev/null
(cd $OUT && tar czf s24d.tgz s24d && rm -rf s24d)
echo "total $((SECONDS-start)) s"
