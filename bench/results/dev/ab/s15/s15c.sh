#!/usr/bin/env bash
# Session 15 (c): every GPU test with the rules' mma_c8_s16 (stacked decode attention from 16
# sequences), then batch-16/64 throughput against plain clusters (mma_c8) by plan file, at 128- and
# 512-token prompts, in turns.
set -uo pipefail
start=$SECONDS
FUSELM_GPU_CHECK_BUDGET=0 bash scripts/gpu-check.sh 2>&1 | grep -E "tests passed|FAILED|Failed|failed|golden|ragged" | head -20
echo "check $((SECONDS-start)) s"
source scripts/gpu-env.sh
cmake --build build-gpu -j 16 --target fuselm > /tmp/b.log 2>&1 || tail -20 /tmp/b.log
M="synthetic:llama-3.1-8b?vocab=32000"
build-gpu/fuselm plan -m "$M" --dtype bf16 --json > /tmp/rules.json 2>/tmp/plan.err || cat /tmp/plan.err
mkdir -p /tmp/arms $OUT/ab
python3 - <<'PY'
import json
d = json.load(open('/tmp/rules.json'))
print('rules:', d['decode']['attention']['kernel'])
json.dump(d, open('/tmp/arms/rules.json', 'w'))
e = json.loads(json.dumps(d)); e['decode']['attention']['kernel'] = 'mma_c8'
json.dump(e, open('/tmp/arms/mma_c8.json', 'w'))
PY
run() {  # arm round prompt
  timeout 60 build-gpu/fuselm bench -m "$M" --device cuda --dtype bf16 -q --no-peak --scenario throughput --batches 16,64 \
      --batch-prompt-len $3 --batch-gen-len 64 --reps 2 --plan /tmp/arms/$1.json --json $OUT/ab/$1-$2-p$3.json > /tmp/l.txt 2>&1 || tail -3 /tmp/l.txt
  python3 - $OUT/ab/$1-$2-p$3.json $1 $2 $3 <<'PY'
import json, sys
p, arm, r, pl = sys.argv[1:5]
try:
    tp = json.load(open(p))['scenarios']['throughput']
    print(f"{arm:<7} {r} prompt {pl:>4} " + "  ".join(f"b{t['batch']} out {t['output_tok_s']:7.1f} dec {t['decode_tok_s']:7.1f}" for t in tp))
except Exception as e:
    print(arm, r, 'unreadable', e)
PY
}
for r in r1 r2; do for p in 128 512; do for arm in mma_c8 rules; do run $arm $r $p; done; done; done
cd $OUT && tar czf ab.tar.gz ab && rm -rf ab
echo "total $((SECONDS-start)) s"
