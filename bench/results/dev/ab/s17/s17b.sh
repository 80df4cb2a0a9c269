#!/usr/bin/env bash
# Session 17 (b): the headline at this commit (every GPU test, timeline, --compare, batch 16), then
# plan-file arms on the gate/up cut now that a grouped CTA stage is one 8 KB copy whatever its shape:
# 8B gate/up on rt2_w8_k4_cta (16 row tiles a CTA, k4: 448 CTAs, one k-tile a stage), 1B gate/up on
# rt1_w8_k4_cta (8 row tiles, k4: 512 CTAs, grouped where rt1_w4_k2_cta is not).
set -uo pipefail
start=$SECONDS
OUT=$OUT bash scripts/gpu-headline.sh 2>&1 | tail -32
echo "headline $((SECONDS-start)) s"
W8="plan:decode.gemm.gate_up.variant=rt2_w8_k4_cta,plan:decode.gemm.gate_up.single_token_variant=rt2_w8_k4_cta"
W1="plan:decode.gemm.gate_up.variant=rt1_w8_k4_cta,plan:decode.gemm.gate_up.single_token_variant=rt1_w8_k4_cta"
timeout 100 bash scripts/gpu-ab.sh llama-3.1-8b 3 rules w:$W8 -- --device cuda --dtype bf16 --scenario latency --reps 2 2>&1 | grep -v "^=="
timeout 100 bash scripts/gpu-ab.sh llama-3.2-1b 3 rules w:$W1 -- --device cuda --dtype bf16 --scenario latency --reps 2 2>&1 | grep -v "^=="
timeout 60 bash scripts/gpu-ab.sh llama-3.1-8b 2 rules16 w16:$W8 -- --device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2 2>&1 | grep -E "16-[12] "
timeout 60 bash scripts/gpu-ab.sh llama-3.2-1b 2 rules16 w16:$W1 -- --device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2 2>&1 | grep -E "16-[12] "
tar czf $OUT/ab.tar.gz bench/results/dev/ab/*.json bench/results/dev/ab/*.log 2>/dev/null
echo "total $((SECONDS-start)) s"
