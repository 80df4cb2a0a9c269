#!/usr/bin/env bash
# Session 13 (f): KV block size 16 (rule) / 32 / 64 by plan file, both shapes, batch-1 latency and
# batch-16 throughput (prompt 512, 128 generated), two rounds in turns.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake --build build-gpu -j 16 --target fuselm > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
for s in llama-3.1-8b llama-3.2-1b; do
  build-gpu/fuselm plan -m "synthetic:$s?vocab=32000" --dtype bf16 --json > /tmp/rules-$s.json 2>/tmp/plan.err || cat /tmp/plan.err
  for b in 16 32 64; do
    python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); d['kv_block']['tokens']=int(sys.argv[2]); json.dump(d, open(sys.argv[3],'w'))" /tmp/rules-$s.json $b /tmp/kv$b-$s.json
  done
done
for r in 1 2; do
  for s in llama-3.1-8b llama-3.2-1b; do
    for b in 16 32 64; do
      timeout 60 build-gpu/fuselm bench -m "synthetic:$s?vocab=32000" --device cuda --dtype bf16 -q --no-peak --scenario latency,throughput --batches 16 \
        --reps 3 --kv-block-size $b --plan /tmp/kv$b-$s.json --json /tmp/f-$s-$b-$r.json > /tmp/l.txt 2>&1 || tail -3 /tmp/l.txt
      python3 -c "
import json,sys; s=json.load(open(sys.argv[1]))['scenarios']; print(sys.argv[2], 'b1 %.1f' % s['latency']['decode_tok_s'], ' '.join('b%d %.0f' % (t['batch'], t['output_tok_s']) for t in s['throughput']))" /tmp/f-$s-$b-$r.json "$s kv$b r$r" 2>/dev/null || echo "$s kv$b r$r unreadable"
    done
  done
done
echo "total $((SECONDS-start)) s"
