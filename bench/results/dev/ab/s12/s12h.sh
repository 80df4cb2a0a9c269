#!/usr/bin/env bash
# Session 12 (h): the 1B gate_up projection's single-token variant (rounding class k2): the rule's
# rt1_w4_k2_cta against rt1_w8_k2_cta and rt2_w8_k2_cta (plan files), batch-1 latency in turns.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
M="synthetic:llama-3.2-1b?vocab=32000"
build-gpu/fuselm plan -m "$M" --dtype bf16 --json > /tmp/rules.json 2>/tmp/plan.err || cat /tmp/plan.err
python3 - <<'PY'
import json
d = json.load(open('/tmp/rules.json'))
print({k: (v['variant'], v['single_token_variant']) for k, v in d['decode']['gemm'].items()})
for name, v in (('w8', 'rt1_w8_k2_cta'), ('rt2w8', 'rt2_w8_k2_cta')):
    e = json.loads(json.dumps(d)); e['decode']['gemm']['gate_up']['single_token_variant'] = v
    json.dump(e, open(f'/tmp/{name}.json', 'w'))
PY
mkdir -p $OUT/ab
for r in 1 2; do
  for arm in rules w8 rt2w8; do
    timeout 60 build-gpu/fuselm bench -m "$M" --device cuda --dtype bf16 -q --no-peak --scenario latency --reps 2 --plan /tmp/$arm.json --json $OUT/ab/lat-$arm-$r.json > /tmp/l.txt 2>&1 || tail -3 /tmp/l.txt
    python3 -c "
import json,sys; print(sys.argv[2], 'b1', round(json.load(open(sys.argv[1]))['scenarios']['latency']['decode_tok_s'],1))" $OUT/ab/lat-$arm-$r.json "$arm round $r"
  done
done
echo "total $((SECONDS-start)) s"
