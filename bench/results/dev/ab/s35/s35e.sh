#!/usr/bin/env bash
# Session 35: the other one-token variants within each 1B GEMM's rounding class, by plan edit (1B,
# two rounds), re-ranked on today's step (the LM head's spread paid where session 23 found it even):
# gate/up rt1_w8_k2_cta and rt1_w4_k2_reg (rules: rt1_w4_k2_cta), down / QKV / O rt1_w4 (rules:
# rt1_w8). Same bits in every arm. Predicted even or worse (each was ranked before).
# Usage (GPU machine, carry .deps .commit): OUT=$OUT bash bench/results/dev/ab/s35/s35e.sh
set -uo pipefail
mkdir -p "$OUT"
rm -f bench/results/dev/ab/*.json
bash scripts/gpu-build.sh fuselm > "$OUT/build.txt" 2>&1 || { tail -20 "$OUT/build.txt"; exit 1; }
g=plan:decode.gemm
timeout 300 bash scripts/gpu-ab.sh llama-3.2-1b 2 base "gu8:$g.gate_up.single_token_variant=rt1_w8_k2_cta" \
    "gureg:$g.gate_up.single_token_variant=rt1_w4_k2_reg" "dn4:$g.down.single_token_variant=rt1_w4" \
    "q4:$g.qkv.single_token_variant=rt1_w4" "o4:$g.o.single_token_variant=rt1_w4" \
    -- --device cuda --dtype bf16 --scenario latency --reps 2
mkdir -p "$OUT/ab" && cp bench/results/dev/ab/*.json "$OUT/ab/" 2>/dev/null
(cd "$OUT" && tar czf ab.tgz ab && rm -rf ab)
