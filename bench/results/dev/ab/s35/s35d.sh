#!/usr/bin/env bash
# Session 35: with the LM head spread (s35b), the one-token choices measured long ago on slower
# steps, by plan edit (1B, two rounds): the LM head's one-token variant within its rounding class
# (rt1_w4_k2_cta: 1,000 CTAs; rt1_w8_k2_reg: the register pipeline, no weight stages in shared
# memory); the O projection inside decode attention's launch (session 30: -0.35%); gate/up and down
# in one launch for one token (sessions 21-22: slower). Same bits in every arm.
# Usage (GPU machine, carry .deps .commit): OUT=$OUT bash bench/results/dev/ab/s35/s35d.sh
set -uo pipefail
mkdir -p "$OUT"
rm -f bench/results/dev/ab/*.json
bash scripts/gpu-build.sh fuselm > "$OUT/build.txt" 2>&1 || { tail -20 "$OUT/build.txt"; exit 1; }
timeout 300 bash scripts/gpu-ab.sh llama-3.2-1b 2 base \
    "lmw4:plan:decode.gemm.lm_head.single_token_variant=rt1_w4_k2_cta" \
    "lmreg:plan:decode.gemm.lm_head.single_token_variant=rt1_w8_k2_reg" \
    "oia:plan:decode.o_in_attention=true" "ffn1:plan:decode.ffn_one_launch_tokens=1" \
    -- --device cuda --dtype bf16 --scenario latency --reps 2
mkdir -p "$OUT/ab" && cp bench/results/dev/ab/*.json "$OUT/ab/" 2>/dev/null
(cd "$OUT" && tar czf ab.tgz ab && rm -rf ab)
