#!/usr/bin/env bash
# Session 13 (a): the 8B batch-16 step with other multi-token variants of each decode GEMM, within
# its rounding class (the one-token variants, and so batch 1's bits and speed, unchanged). Plan
# files, batch-16 throughput (prompt 512, 128 generated); round 1 one arm per change, round 2 the
# rule plan against the per-op best of round 1, in turns.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
M="synthetic:llama-3.1-8b?vocab=32000"
build-gpu/fuselm plan -m "$M" --dtype bf16 --json > /tmp/rules.json 2>/tmp/plan.err || cat /tmp/plan.err
mkdir -p $OUT/ab /tmp/arms
python3 - <<'PY'
import json
d = json.load(open('/tmp/rules.json'))
print({k: (v['variant'], v['single_token_variant']) for k, v in d['decode']['gemm'].items()})
arms = {'gu_rt1w8': ('gate_up', 'rt1_w8_k2_cta'), 'gu_rt2w8': ('gate_up', 'rt2_w8_k2_cta'),
        'gu_rt1w4': ('gate_up', 'rt1_w4_k2_cta'), 'gu_rt4w4': ('gate_up', 'rt4_w4_k2_cta'),
        'qkv_rt2w4': ('qkv', 'rt2_w4_k4_cta'), 'qkv_rt1w8': ('qkv', 'rt1_w8_k4_cta'), 'qkv_rt2w8': ('qkv', 'rt2_w8_k4_cta'),
        'o_rt2w4': ('o', 'rt2_w4_k8_cta'), 'o_rt1w8': ('o', 'rt1_w8_k8_cta'),
        'dn_rt2w4': ('down', 'rt2_w4_k8_cta'), 'dn_rt1w8': ('down', 'rt1_w8_k8_cta'), 'dn_rt2w8': ('down', 'rt2_w8_k8_cta'),
        'lm_rt1w8': ('lm_head', 'rt1_w8_k2_cta')}
json.dump(d, open('/tmp/arms/rules.json', 'w'))
for name, (op, v) in arms.items():
    e = json.loads(json.dumps(d)); e['decode']['gemm'][op]['variant'] = v
    json.dump(e, open(f'/tmp/arms/{name}.json', 'w'))
json.dump(arms, open('/tmp/arms/index.json', 'w'))
PY
run() {  # arm tag
  local t0=$SECONDS
  timeout 90 build-gpu/fuselm bench -m "$M" --device cuda --dtype bf16 -q --no-peak --scenario throughput --batches 16 --reps 2 \
      --plan /tmp/arms/$1.json --json $OUT/ab/$1-$2.json > /tmp/l.txt 2>&1 || tail -3 /tmp/l.txt
  python3 -c "
import json,sys; print('%-10s %-3s b16 %8.1f  (%d s)' % (sys.argv[2], sys.argv[3], json.load(open(sys.argv[1]))['scenarios']['throughput'][0]['output_tok_s'], int(sys.argv[4])))" \
      $OUT/ab/$1-$2.json $1 $2 $((SECONDS-t0)) 2>/dev/null || echo "$1 $2 unreadable"
}
for arm in rules gu_rt1w8 gu_rt2w8 gu_rt1w4 gu_rt4w4 qkv_rt2w4 qkv_rt1w8 qkv_rt2w8 o_rt2w4 o_rt1w8 dn_rt2w4 dn_rt1w8 dn_rt2w8 lm_rt1w8; do
  run $arm r1
  [ $((SECONDS-start)) -gt 420 ] && { echo "time: stopping round 1"; break; }
done
python3 - $OUT/ab <<'PY'
import json, sys, glob, os
out = sys.argv[1]
idx = json.load(open('/tmp/arms/index.json'))
tok = {}
for p in glob.glob(f'{out}/*-r1.json'):
    try: tok[os.path.basename(p)[:-8]] = json.load(open(p))['scenarios']['throughput'][0]['output_tok_s']
    except Exception: pass
base = tok.get('rules', 0)
best = {}
for name, (op, v) in idx.items():
    if name in tok and tok[name] > base * 1.005 and tok[name] > best.get(op, (None, 0))[1]: best[op] = (v, tok[name])
print('per-op best over rules', base, best)
d = json.load(open('/tmp/arms/rules.json'))
for op, (v, _) in best.items(): d['decode']['gemm'][op]['variant'] = v
json.dump(d, open('/tmp/arms/combo.json', 'w'))
PY
for r in r2 r3; do
  [ $((SECONDS-start)) -gt 500 ] && break
  run rules $r; run combo $r
done
cp /tmp/arms/combo.json $OUT/ab/
echo "total $((SECONDS-start)) s"
