#!/usr/bin/env bash
# Session 13 (b): multi-token decode GEMM variants within each op's rounding class, by plan file, in
# the whole step at batches 1-64 (throughput, prompt 512, 128 generated), two rounds in turns.
# 8B arms on top of gate_up rt1_w8_k2_cta for every m (s13a's best); 1B arms on top of the rules.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
mkdir -p $OUT/ab /tmp/arms
for s in llama-3.1-8b llama-3.2-1b; do
  build-gpu/fuselm plan -m "synthetic:$s?vocab=32000" --dtype bf16 --json > /tmp/rules-$s.json 2>/tmp/plan.err || cat /tmp/plan.err
done
python3 - <<'PY'
import json
def make(shape, base_changes, arms):
    d = json.load(open(f'/tmp/rules-{shape}.json'))
    print(shape, {k: (v['variant'], v['single_token_variant']) for k, v in d['decode']['gemm'].items()})
    json.dump(d, open(f'/tmp/arms/{shape}-rules.json', 'w'))
    for name, changes in arms.items():
        e = json.loads(json.dumps(d))
        for op, v in base_changes + changes: e['decode']['gemm'][op]['variant'] = v
        json.dump(e, open(f'/tmp/arms/{shape}-{name}.json', 'w'))
g8 = [('gate_up', 'rt1_w8_k2_cta')]
make('llama-3.1-8b', g8, {'g8': [], 'g8_lm8': [('lm_head', 'rt1_w8_k2_cta')],
     'g8_qkv2': [('qkv', 'rt2_w4_k4_cta')], 'g8_qkv8': [('qkv', 'rt1_w8_k4_cta')], 'g8_qkv4': [('qkv', 'rt4_w4_k4_cta')],
     'g8_o2': [('o', 'rt2_w4_k8_cta')], 'g8_o8': [('o', 'rt1_w8_k8_cta')], 'g8_o4': [('o', 'rt4_w4_k8_cta')],
     'g8_dn2': [('down', 'rt2_w4_k8_cta')], 'g8_dn8': [('down', 'rt1_w8_k8_cta')], 'g8_dn4': [('down', 'rt4_w4_k8_cta')]})
make('llama-3.2-1b', [], {'gu8': [('gate_up', 'rt1_w8_k2_cta')], 'gu2': [('gate_up', 'rt2_w4_k2_cta')],
     'lm8': [('lm_head', 'rt1_w8_k2_cta')], 'qkv8': [('qkv', 'rt1_w8_k8_cta')], 'qkv2': [('qkv', 'rt2_w4_k8_cta')],
     'o8': [('o', 'rt1_w8_k8_cta')], 'dn8': [('down', 'rt1_w8_k8_cta')], 'dn2': [('down', 'rt2_w4_k8_cta')]})
PY
run() {  # shape arm round
  timeout 90 build-gpu/fuselm bench -m "synthetic:$1?vocab=32000" --device cuda --dtype bf16 -q --no-peak --scenario throughput \
      --batches 1,2,4,8,16,32,64 --reps 2 --plan /tmp/arms/$1-$2.json --json /tmp/ab-$1-$2-$3.json > /tmp/l.txt 2>&1 || tail -3 /tmp/l.txt
}
for r in 1 2; do
  for arm in rules g8 g8_lm8 g8_qkv2 g8_qkv8 g8_qkv4 g8_o2 g8_o8 g8_o4 g8_dn2 g8_dn8 g8_dn4; do run llama-3.1-8b $arm $r; done
  for arm in rules gu8 gu2 lm8 qkv8 qkv2 o8 dn8 dn2; do run llama-3.2-1b $arm $r; done
  echo "round $r $((SECONDS-start)) s"
done
tar czf $OUT/ab/s13b.tar.gz /tmp/ab-*.json /tmp/arms 2>/dev/null
python3 - <<'PY'
import json, glob, os, collections
rows = collections.defaultdict(dict)
for p in sorted(glob.glob('/tmp/ab-*.json')):
    name = os.path.basename(p)[3:-5]
    shape, rest = name.rsplit('-', 2)[0], name.rsplit('-', 2)[1:]
    try: t = json.load(open(p))['scenarios']['throughput']
    except Exception: print(name, 'unreadable'); continue
    rows[(shape, rest[0])][rest[1]] = {x['batch']: x['output_tok_s'] for x in t}
for (shape, arm), rounds in sorted(rows.items()):
    base = rows.get((shape, 'rules'), {})
    for r, v in sorted(rounds.items()):
        b = base.get(r, {})
        print(f"{shape[6:]:<7} {arm:<8} r{r} " + ' '.join(f"{k}:{v[k]:.0f}({v[k]/b[k]-1:+.1%})" if k in b else f"{k}:{v[k]:.0f}" for k in sorted(v)))
PY
echo "total $((SECONDS-start)) s"
