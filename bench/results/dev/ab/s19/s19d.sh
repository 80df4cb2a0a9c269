#!/usr/bin/env bash
# Session 19 (d): which ops to balance, per bucket. s19c (balance_sms fixed): 8B batch 1 w7 (gate/up
# on rt1_w7_k2_cta) 256.9-258.0 tok/s against the rules' 250.2-250.4, w7 + every op balanced
# 256.7-257.0, every op balanced on the rules' variants 248.2-249.0; batch 16 w7 2,948-2,950 output
# tok/s (its gate/up 69.8 us a layer), w7 + all balanced 3,121-3,126 (gate/up 59.2), rules 3,098.
# 1B batch 1: gate/up balanced (gub) 1,166-1,173 against 1,107-1,111, all 1,148-1,167; batch 16 gub
# 13,487-13,563, all 14,741-14,750, rules 13,932-13,956. Arms here: subsets, to pick what each
# bucket runs. Prediction: 8B batch 16 gate/up alone ~ all (its 10 us are the gain); 1B batch 16
# the residual GEMMs (o, down: 128-256 CTAs) carry the gain, batch 1 gate/up alone is best.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
W7="plan:decode.gemm.gate_up.variant=rt1_w7_k2_cta,plan:decode.gemm.gate_up.single_token_variant=rt1_w7_k2_cta"
b() { local out="" op; for op in "$@"; do out+="${out:+,}plan:decode.gemm.$op.balance_sms=true"; done; echo "$out"; }
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
T16="--device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2"
timeout 150 bash scripts/gpu-ab.sh llama-3.1-8b 2 w716:$W7 w7allb16:$W7,$(b qkv o gate_up down lm_head) \
    w7gub16:$W7,$(b gate_up) w7nogub16:$W7,$(b qkv o down lm_head) w7gudb16:$W7,$(b gate_up down) \
    w7guob16:$W7,$(b gate_up o down) -- $T16 2>&1 | grep -E "16-[12] "
timeout 100 bash scripts/gpu-ab.sh llama-3.1-8b 3 w7:$W7 w7gub:$W7,$(b gate_up) w7lmb:$W7,$(b lm_head) -- $LAT 2>&1 | grep -v "^=="
echo "8B $((SECONDS-start)) s"
timeout 100 bash scripts/gpu-ab.sh llama-3.2-1b 2 rules16 allb16:$(b qkv o gate_up down lm_head) nogub16:$(b qkv o down lm_head) \
    odb16:$(b o down) qkvb16:$(b qkv) gudb16:$(b gate_up down) lmb16:$(b lm_head) -- $T16 2>&1 | grep -E "16-[12] "
timeout 100 bash scripts/gpu-ab.sh llama-3.2-1b 3 rules gub:$(b gate_up) gudb:$(b gate_up down) guqb:$(b gate_up qkv) \
    gulmb:$(b gate_up lm_head) -- $LAT 2>&1 | grep -v "^=="
echo "1B $((SECONDS-start)) s"
tar czf $OUT/ab.tar.gz bench/results/dev/ab/*.json 2>/dev/null
echo "total $((SECONDS-start)) s"
