#!/usr/bin/env bash
# Session 35: the 1B LM head spread evenly over the SMs at one token (a plan edit, no code). s34e's
# timeline put five of its 500 one-token CTAs on 85.5 SMs and one to four on the rest (its K loop
# ~3.7 TB/s on average, ending 36.2 us after the last down projection against 28.4 us of weights at
# 4.61 TB/s). Session 23 measured the same edit even on a step 6% slower than today's. Same bits
# (placement only). Predicted 1B +0.3-0.6%, 8B even (session 21: even).
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s35/s35b.sh
set -uo pipefail
mkdir -p "$OUT"
bash scripts/gpu-build.sh fuselm > "$OUT/build.txt" 2>&1 || { tail -20 "$OUT/build.txt"; exit 1; }
edit=plan:decode.gemm.lm_head.single_token_balance_sms=true
timeout 240 bash scripts/gpu-ab.sh llama-3.2-1b 3 base "lmbal:$edit" -- --device cuda --dtype bf16 \
    --scenario latency --reps 2
timeout 120 bash scripts/gpu-ab.sh llama-3.1-8b 1 base "lmbal:$edit" -- --device cuda --dtype bf16 \
    --scenario latency --reps 2
mkdir -p "$OUT/ab" && cp bench/results/dev/ab/*.json "$OUT/ab/" 2>/dev/null
(cd "$OUT" && tar czf ab.tgz ab && rm -rf ab)
