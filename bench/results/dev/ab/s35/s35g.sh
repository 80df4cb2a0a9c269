#!/usr/bin/env bash
# Session 35: the 8B QKV projection's grid spread evenly for 2+ tokens (the one 8B decode GEMM the
# rules leave unspread: 384 CTAs of rt1_w4_k4_cta at batch 16, 2.9 an SM), batch 16, two rounds.
# Same bits (placement only). Predicted even to +0.5% (session 19: every GEMM spread, 8B batch 16 even).
# Usage (GPU machine, carry .deps .commit): OUT=$OUT bash bench/results/dev/ab/s35/s35g.sh
set -uo pipefail
mkdir -p "$OUT"
rm -f bench/results/dev/ab/*.json
bash scripts/gpu-build.sh fuselm > "$OUT/build.txt" 2>&1 || { tail -20 "$OUT/build.txt"; exit 1; }
timeout 300 bash scripts/gpu-ab.sh llama-3.1-8b 2 base16 "qb16:plan:decode.gemm.qkv.balance_sms=true" \
    -- --device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2
mkdir -p "$OUT/ab" && cp bench/results/dev/ab/*.json "$OUT/ab/" 2>/dev/null
(cd "$OUT" && tar czf ab.tgz ab && rm -rf ab)
