#!/usr/bin/env bash
# Session 13 (d): the one-token decode GEMM variants within each op's rounding class, by plan file,
# batch-1 decode (latency scenario, prompt 512, 128 generated) in the whole step, two rounds in turns.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
mkdir -p /tmp/arms
for s in llama-3.1-8b llama-3.2-1b; do
  build-gpu/fuselm plan -m "synthetic:$s?vocab=32000" --dtype bf16 --json > /tmp/rules-$s.json 2>/tmp/plan.err || cat /tmp/plan.err
done
python3 - <<'PY'
import json
def make(shape, arms):
    d = json.load(open(f'/tmp/rules-{shape}.json'))
    print(shape, {k: (v['variant'], v['single_token_variant']) for k, v in d['decode']['gemm'].items()})
    json.dump(d, open(f'/tmp/arms/{shape}-rules.json', 'w'))
    names = []
    for op, vs in arms.items():
        for v in vs:
            e = json.loads(json.dumps(d)); e['decode']['gemm'][op]['single_token_variant'] = v
            name = f'{op}={v}'; names.append(name)
            json.dump(e, open(f'/tmp/arms/{shape}-{name}.json', 'w'))
    open(f'/tmp/arms/{shape}.list', 'w').write('\n'.join(['rules'] + names))
k8 = ['rt2_w8', 'rt1_w4_k8_cta', 'rt1_w8_k8_cta']
make('llama-3.1-8b', {'qkv': ['rt2_w4', 'rt4_w4', 'rt1_w4_k4_cta', 'rt1_w8_k4_cta'], 'o': k8, 'down': k8,
                      'gate_up': ['rt1_w4_k2_cta', 'rt2_w4_k2_cta'], 'lm_head': ['rt1_w4_k2_cta']})
make('llama-3.2-1b', {'qkv': k8, 'o': k8, 'down': k8, 'lm_head': ['rt1_w4_k2_cta']})
PY
for r in 1 2; do
  for s in llama-3.1-8b llama-3.2-1b; do
    while read -r arm; do
      timeout 60 build-gpu/fuselm bench -m "synthetic:$s?vocab=32000" --device cuda --dtype bf16 -q --no-peak --scenario latency \
        --reps 3 --plan "/tmp/arms/$s-$arm.json" --json "/tmp/d-$s-$arm-$r.json" > /tmp/l.txt 2>&1 || tail -2 /tmp/l.txt
    done < /tmp/arms/$s.list
  done
  echo "round $r $((SECONDS-start)) s"
done
tar czf $OUT/s13d.tar.gz /tmp/d-*.json /tmp/arms 2>/dev/null
python3 - <<'PY'
import json, glob, os
for s in ['llama-3.1-8b', 'llama-3.2-1b']:
    arms = open(f'/tmp/arms/{s}.list').read().split('\n')
    def tok(arm, r):
        try: return json.load(open(f'/tmp/d-{s}-{arm}-{r}.json'))['scenarios']['latency']['decode_tok_s']
        except Exception: return float('nan')
    base = [tok('rules', r) for r in (1, 2)]
    for arm in arms:
        t = [tok(arm, r) for r in (1, 2)]
        print(f"{s[6:]:<7} {arm:<24} " + '  '.join(f"{x:8.1f} ({x / b - 1:+.1%})" for x, b in zip(t, base)))
PY
echo "total $((SECONDS-start)) s"
