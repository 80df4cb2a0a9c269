#!/usr/bin/env bash
# Session 14 (g): --compare baseline,fused on both shapes at the session's last code (prefill's
# projections on the sm_90a GEMMs).
set -uo pipefail
start=$SECONDS
export FUSELM_COMMIT=$(cat .commit)
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
for s in llama-3.1-8b llama-3.2-1b; do
  timeout 150 build-gpu/fuselm bench -m "synthetic:$s?vocab=32000" --device cuda --dtype bf16 --scenario latency \
      --compare baseline,fused --reps 3 -q --json $OUT/h200-$s-compare.json --markdown $OUT/h200-$s-compare.md > /tmp/cmp.txt 2>&1 || tail -5 /tmp/cmp.txt
  python3 - $OUT/h200-$s-compare.json $s <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); c = d['compare']; sp = c['speedup']
f = c['fused']['scenarios']['latency']; b = c['baseline']['scenarios']['latency']
pk = d.get('peak_bandwidth') or {}
print(sys.argv[2], 'fused %.1f baseline %.1f speedup %.3f ttft fused %.2f baseline %.2f ms (ratio %.3f) copy/memcpy %.4f' % (
    f['decode_tok_s'], b['decode_tok_s'], sp['decode'], f['ttft_ms'], b['ttft_ms'], sp['latency']['ttft_ms']['speedup'],
    pk.get('copy_kernel_vs_memcpy', float('nan'))))
PY
  echo "$s $((SECONDS-start)) s"
done
