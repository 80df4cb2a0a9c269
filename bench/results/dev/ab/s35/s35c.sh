#!/usr/bin/env bash
# Session 35: after the LM head (s35b), the other one-token grids the rules leave unspread, by plan
# edit on the tree with the LM head spread: the 1B O projection (128 one-token CTAs of 102 KB: s34e
# put two on 55.7 SMs and one on 16.5; spread, one an SM on 128, leaving room for a gate/up CTA
# beside each), predicted 1B +0-0.5%; the QKV projection (192 CTAs, already two an SM on 92 SMs),
# predicted even; both. 8B one round (its O and QKV grids are two and three an SM already).
# Usage (GPU machine, carry .deps .commit): OUT=$OUT bash bench/results/dev/ab/s35/s35c.sh
set -uo pipefail
mkdir -p "$OUT"
rm -f bench/results/dev/ab/*.json
bash scripts/gpu-build.sh fuselm > "$OUT/build.txt" 2>&1 || { tail -20 "$OUT/build.txt"; exit 1; }
o=plan:decode.gemm.o.single_token_balance_sms=true
q=plan:decode.gemm.qkv.single_token_balance_sms=true
timeout 300 bash scripts/gpu-ab.sh llama-3.2-1b 3 base "o1:$o" "q1:$q" "oq1:$o,$q" -- --device cuda --dtype bf16 \
    --scenario latency --reps 2
timeout 150 bash scripts/gpu-ab.sh llama-3.1-8b 1 base "o1:$o" "q1:$q" -- --device cuda --dtype bf16 \
    --scenario latency --reps 2
mkdir -p "$OUT/ab" && cp bench/results/dev/ab/*.json "$OUT/ab/" 2>/dev/null
(cd "$OUT" && tar czf ab.tgz ab && rm -rf ab)
