#!/usr/bin/env bash
# Session 35: the 1B one-token QKV, O and down projections on their CTA-pipeline variant itself
# (rt1_w4_k8_cta, the k8 class) instead of its warp-pipeline twin rt1_w8 (the rules), and the LM head
# on rt1_w7_k2_cta (k2 class), by plan edit, two rounds. Same bits. Predicted even or worse.
# Usage (GPU machine, carry .deps .commit): OUT=$OUT bash bench/results/dev/ab/s35/s35f.sh
set -uo pipefail
mkdir -p "$OUT"
rm -f bench/results/dev/ab/*.json
bash scripts/gpu-build.sh fuselm > "$OUT/build.txt" 2>&1 || { tail -20 "$OUT/build.txt"; exit 1; }
g=plan:decode.gemm
timeout 300 bash scripts/gpu-ab.sh llama-3.2-1b 2 base "qc:$g.qkv.single_token_variant=rt1_w4_k8_cta" \
    "oc:$g.o.single_token_variant=rt1_w4_k8_cta" "dnc:$g.down.single_token_variant=rt1_w4_k8_cta" \
    "lm7:$g.lm_head.single_token_variant=rt1_w7_k2_cta" \
    -- --device cuda --dtype bf16 --scenario latency --reps 2
mkdir -p "$OUT/ab" && cp bench/results/dev/ab/*.json "$OUT/ab/" 2>/dev/null
(cd "$OUT" && tar czf ab.tgz ab && rm -rf ab)
