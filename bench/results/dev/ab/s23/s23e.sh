#!/usr/bin/env bash
# Session 23 (e): the 1B LM head's variant. The rules give every decode GEMM with >= 10 row tiles an
# SM rt1_w8_k2_cta (measured on the 8B gate/up, K = 4096, and the 8B LM head, alike), so the 1B LM
# head (32000 x 2048, 15.2 row tiles an SM) runs it; the 1B gate/up, whose K is the same 2,048, ran
# 10% slower on rt1_w8_k2_cta than on rt1_w4_k2_cta at one token (s12h), and never had the LM
# head measured beside it. Arms (plan edits, same bits: the k2 class either way): the rules;
# rt1_w4_k2_cta; rt1_w4_k2_cta spread evenly at one token as the 1B gate/up is. The LM head is 131 MB
# of the step's 2.1 GB: at the gate/up's rate instead of ~3.2-3.5 TB/s it would take ~5 us less
# (predicted +0.5-1% at 1B batch 1, 8B unchanged). Then `--compare` on the rules and on the
# faster arm's plan.
set -uo pipefail
start=$SECONDS
bash scripts/gpu-build.sh fuselm || exit 1
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
L=plan:decode.gemm.lm_head
timeout 200 bash scripts/gpu-ab.sh llama-3.2-1b 3 rules lmw4:$L.variant=rt1_w4_k2_cta,$L.single_token_variant=rt1_w4_k2_cta \
    lmw4e:$L.variant=rt1_w4_k2_cta,$L.single_token_variant=rt1_w4_k2_cta,$L.single_token_balance_sms=true \
    -- $LAT 2>&1 | grep -v "^=="
echo "ab $((SECONDS-start)) s"
best=$(python3 - <<'PY'
import json, glob
rate = {}
for arm in ("lmw4", "lmw4e"):
    v = [json.load(open(f))["scenarios"]["latency"]["decode_tok_s"] for f in glob.glob(f"bench/results/dev/ab/llama-3.2-1b-{arm}-*.json")]
    rate[arm] = sum(v) / max(len(v), 1)
print(max(rate, key=rate.get))
PY
)
echo "compare: rules and $best"
model="synthetic:llama-3.2-1b?vocab=32000"
for arm in rules $best; do
  plan=(); [ $arm != rules ] && plan=(--plan bench/results/dev/ab/llama-3.2-1b-$arm.plan.json)
  timeout 100 build-gpu/fuselm bench -m "$model" --device cuda --dtype bf16 --scenario latency --compare baseline,fused \
      --reps 3 -q "${plan[@]}" --json $OUT/s23e-compare-$arm.json > /tmp/cmp.txt 2>&1 || tail -5 /tmp/cmp.txt
  python3 -c "
import json; c=json.load(open('$OUT/s23e-compare-$arm.json'))['compare']
print('$arm', round(c['fused']['scenarios']['latency']['decode_tok_s'],1), round(c['baseline']['scenarios']['latency']['decode_tok_s'],1), round(c['speedup']['decode'],3))"
done
mkdir -p $OUT/s23e && cp bench/results/dev/ab/*.json $OUT/s23e/ 2>/dev/null
(cd $OUT && tar czf s23e.tgz s23e && rm -rf s23e)
echo "total $((SECONDS-start)) s"
