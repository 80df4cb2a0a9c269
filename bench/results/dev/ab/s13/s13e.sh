#!/usr/bin/env bash
# Session 13 (e): the 1B decode split size (one CTA per split, head_dim 64) by plan file: 256 (rule),
# 128, 64; batch-1 latency and batch-16 throughput (prompt 512, 128 generated), two rounds in turns.
# Then the 8B plan with the LM head's one-token variant rt1_w4_k2_cta, which failed in s13d: its error.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
M="synthetic:llama-3.2-1b?vocab=32000"
build-gpu/fuselm plan -m "$M" --dtype bf16 --json > /tmp/rules.json 2>/tmp/plan.err || cat /tmp/plan.err
python3 - <<'PY'
import json, math
d = json.load(open('/tmp/rules.json'))
m, lim = d['model'], d['limits']
print('limits', lim, 'attention', {k: v for k, v in d['decode']['attention'].items() if k != 'measured'})
def ws(split):
    a16 = lambda b: (b + 15) // 16 * 16
    groups = m['num_kv_heads'] * math.ceil(m['num_heads'] // m['num_kv_heads'] / 16)
    slots = m['num_heads'] * math.ceil(lim['max_seq_len'] / split)
    return 16 + lim['max_batch'] * (a16(groups * 4) + a16(slots * 4) + slots * m['head_dim'] * 4)
for split in (256, 128, 64):
    e = json.loads(json.dumps(d)); a = e['decode']['attention']
    a['split_tokens'] = split; a['max_splits_per_seq'] = math.ceil(lim['max_seq_len'] / split); a['workspace_bytes'] = ws(split)
    for b in e['decode']['buckets']: b['attention_grid'][2] = a['max_splits_per_seq']
    json.dump(e, open(f'/tmp/split{split}.json', 'w'))
PY
for r in 1 2; do
  for split in 256 128 64; do
    timeout 60 build-gpu/fuselm bench -m "$M" --device cuda --dtype bf16 -q --no-peak --scenario latency,throughput --batches 16 \
      --reps 3 --plan /tmp/split$split.json --json /tmp/e-$split-$r.json > /tmp/l.txt 2>&1 || tail -3 /tmp/l.txt
    python3 -c "
import json,sys; s=json.load(open(sys.argv[1]))['scenarios']; print(sys.argv[2], 'b1 %.1f' % s['latency']['decode_tok_s'], ' '.join('b%d %.0f' % (t['batch'], t['output_tok_s']) for t in s['throughput']))" /tmp/e-$split-$r.json "split $split r$r" 2>/dev/null || echo "split $split r$r unreadable"
  done
done
echo "== 8B, LM head one token on rt1_w4_k2_cta"
timeout 60 build-gpu/fuselm bench -m "synthetic:llama-3.1-8b?vocab=32000" --device cuda --dtype bf16 -q --no-peak --scenario latency \
  --reps 1 --plan .lab/lm-w4.json 2>&1 | tail -8
tar czf $OUT/s13e.tar.gz /tmp/e-*.json /tmp/split*.json 2>/dev/null
echo "total $((SECONDS-start)) s"
