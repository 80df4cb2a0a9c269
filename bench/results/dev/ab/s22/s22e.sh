#!/usr/bin/env bash
# Session 22 (e): the closing measurement, trimmed to the device time left (scripts/gpu-headline.sh
# needs more): `--compare baseline,fused` on both shapes as the headline runs it, the fused engine's
# GPU tests (bitwise batch invariance, fused against the baseline), and 8B batch-16 output.
set -uo pipefail
export FUSELM_COMMIT=${FUSELM_COMMIT:-$(cat .commit 2>/dev/null || echo unknown)}
C=$FUSELM_COMMIT
start=$SECONDS
bash scripts/gpu-build.sh fuselm gpu_fused_engine_test || exit 1
R=bench/results
for s in llama-3.2-1b llama-3.1-8b; do
  timeout 100 build-gpu/fuselm bench -m "synthetic:$s?vocab=32000" --device cuda --dtype bf16 --scenario latency \
      --compare baseline,fused --reps 3 -q --json $R/h200-$s-compare.json --markdown $R/h200-$s-compare.md \
      > /tmp/compare.txt 2>&1 || tail -5 /tmp/compare.txt
  python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['compare']; print(sys.argv[2], 'fused %.1f baseline %.1f speedup %.3f' % (c['fused']['scenarios']['latency']['decode_tok_s'], c['baseline']['scenarios']['latency']['decode_tok_s'], c['speedup']['decode']))" $R/h200-$s-compare.json $s
  cp $R/h200-$s-compare.json $R/h200-$s-compare.md $OUT/ 2>/dev/null
  echo "compare $s $((SECONDS-start)) s"
done
timeout 40 build-gpu/fuselm bench -m "synthetic:llama-3.1-8b?vocab=32000" --device cuda --dtype bf16 --scenario throughput \
    --batches 16 --reps 2 -q --no-peak --json $R/dev/b16-llama-3.1-8b-$C.json > /tmp/b16.txt 2>&1 || tail -3 /tmp/b16.txt
python3 -c "import json,sys; print('8b b16 output %.1f tok/s' % json.load(open(sys.argv[1]))['scenarios']['throughput'][0]['output_tok_s'])" $R/dev/b16-llama-3.1-8b-$C.json
cp $R/dev/b16-llama-3.1-8b-$C.json $OUT/ 2>/dev/null
timeout 60 build-gpu/tests/gpu_fused_engine_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure|tests ran" -A3 | head -12
echo "tests $((SECONDS-start)) s"
echo "total $((SECONDS-start)) s"
