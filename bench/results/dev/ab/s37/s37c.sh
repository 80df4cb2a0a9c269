#!/usr/bin/env bash
# Session 37, fourth call: what the 8B batch-16 step gains, and batch 1 loses, with the QKV and down
# projections in the k2x8 rounding class (the warp pipeline, 8 warps, K split in two across a
# cluster), the fastest class at 16 tokens in the isolated lab (a/lab-8b.txt: QKV rt4_w8_k2 17.2 us
# against the rules' 19.1, down 34.3 against 35.5; at one token rt4_w8_k2 16.5 against 15.7 and
# rt2_w8_k2 29.9 against 29.0). Plan edits, same bits within each arm (batch invariance holds in
# either class). Predicted from the lab: batch 16 +1.5-2%, batch 1 -1.2%.
# Usage (GPU machine, carry .deps .commit):  OUT=$OUT bash bench/results/dev/ab/s37/s37c.sh
set -uo pipefail
mkdir -p "$OUT"
bash scripts/gpu-build.sh fuselm > "$OUT/build.txt" 2>&1 || { tail -20 "$OUT/build.txt"; exit 1; }
k2x8=plan:decode.gemm.qkv.variant=rt4_w8_k2,plan:decode.gemm.qkv.single_token_variant=rt4_w8_k2
k2x8=$k2x8,plan:decode.gemm.down.variant=rt4_w8_k2,plan:decode.gemm.down.single_token_variant=rt2_w8_k2
rm -f bench/results/dev/ab/llama-3.1-8b-*.json
bash scripts/gpu-ab.sh llama-3.1-8b 2 rules16 "k2x8_16:$k2x8" -- --device cuda --dtype bf16 --scenario throughput \
  --batches 16 --reps 2 2>&1 | tail -6
bash scripts/gpu-ab.sh llama-3.1-8b 2 rules1 "k2x8_1:$k2x8" -- --device cuda --dtype bf16 --scenario latency \
  --reps 2 2>&1 | tail -6
tar czf "$OUT/ab.tgz" bench/results/dev/ab/llama-3.1-8b-*.json bench/results/dev/ab/llama-3.1-8b-*.log
