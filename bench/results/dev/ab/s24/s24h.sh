#!/usr/bin/env bash
# s24h: the headline's `--compare` runs and the 8B batch-16 run alone, on the session's final
# kernels (failed machine starts left no device time for scripts/gpu-headline.sh; its GPU tests ran
# in s24a and s24b on these kernels, its timeline in s24b).
# Usage (on the GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s24/s24h.sh
set -uo pipefail
start=$SECONDS
C=$(cat .commit 2>/dev/null || echo unknown)
export FUSELM_COMMIT=$C  # the copy of the tree on the GPU machine may carry a stale .git
bash scripts/gpu-build.sh fuselm || exit 1
for s in llama-3.1-8b llama-3.2-1b; do
  timeout 100 build-gpu/fuselm bench -m "synthetic:$s?vocab=32000" --device cuda --dtype bf16 --scenario latency \
      --compare baseline,fused --reps 3 -q --json bench/results/h200-$s-compare.json \
      --markdown bench/results/h200-$s-compare.md > /tmp/cmp.txt 2>&1 || tail -5 /tmp/cmp.txt
  python3 -c "
import json; c=json.load(open('bench/results/h200-$s-compare.json'))['compare']
print('$s fused', round(c['fused']['scenarios']['latency']['decode_tok_s'],1), 'baseline',
      round(c['baseline']['scenarios']['latency']['decode_tok_s'],1), 'speedup', round(c['speedup']['decode'],3))"
done
timeout 60 build-gpu/fuselm bench -m "synthetic:llama-3.1-8b?vocab=32000" --device cuda --dtype bf16 --scenario throughput \
    --batches 16 --reps 3 -q --no-peak --json bench/results/dev/b16-llama-3.1-8b-$C.json > /tmp/b16.txt 2>&1 || tail -5 /tmp/b16.txt
python3 -c "
import json; t=json.load(open('bench/results/dev/b16-llama-3.1-8b-$C.json'))['scenarios']['throughput'][0]
print('8B batch 16 output', round(t['output_tok_s'],1), 'decode', round(t['decode_tok_s'],1))"
mkdir -p $OUT/r && cp bench/results/h200-*-compare.* bench/results/dev/b16-llama-3.1-8b-$C.json $OUT/r/
echo "total $((SECONDS-start)) s"
