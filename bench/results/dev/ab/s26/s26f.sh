#!/usr/bin/env bash
# s26f (last minutes of the session's device time): the first-item records (b.patch: decode
# attention's first item and block numbers per CTA staged by the host) built and checked once:
# the decode attention GPU tests (records against none: the same bits), then the 1B batch-1 rate
# without an A/B arm (s26e's base read 1,321.5-1,324.6 on another machine).
# Usage (GPU machine, carry .deps .commit .gpu-models; b.patch applied to the tree): OUT=$OUT bash ...
set -uo pipefail
start=$SECONDS
export FUSELM_COMMIT=$(cat .commit 2>/dev/null || echo unknown)-b
bash scripts/gpu-build.sh fuselm gpu_attention_test || exit 1
timeout 60 build-gpu/tests/gpu_attention_test --gtest_filter='*Decode*:-*Bench*' 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
echo "tests $((SECONDS-start)) s"
for i in 1 2 3; do
  timeout 40 build-gpu/fuselm bench -m 'synthetic:llama-3.2-1b?vocab=32000' --device cuda --dtype bf16 --scenario latency \
      --reps 2 -q --json $OUT/s26f-1b-$i.json > /dev/null 2>&1
  python3 -c "import json; print('1B batch 1', round(json.load(open('$OUT/s26f-1b-$i.json'))['scenarios']['latency']['decode_tok_s'], 1))"
done
echo "total $((SECONDS-start)) s"
