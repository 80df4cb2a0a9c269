#!/usr/bin/env bash
# Session 12 (c): the deep warp pipeline only for long K loops (1B down, not 1B O); the skinny GEMM
# tests; 1B decode attention in clusters of 8 (plan file) against the rule table's one CTA per split.
set -uo pipefail
C=$(cat .commit)
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_decode_timeline_test gpu_skinny_gemm_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
build-gpu/tests/gpu_skinny_gemm_test 2>&1 | grep -E "^\[  (PASSED|FAILED)|FAILED|Deep" | head -8
mkdir -p $OUT/tl $OUT/ab
for a in 0 1; do
  FUSELM_LAB_DEEP=$a build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" > $OUT/tl/$C-deep$a.txt
  echo "== deep $a"; grep -v "us after" $OUT/tl/$C-deep$a.txt | grep "llama-3.2-1b" | awk '{print $2,$3,$4,$5,$7,$9,$10,$11,$15,$16}'
done
echo "timelines $((SECONDS-start)) s"
M="synthetic:llama-3.2-1b?vocab=32000"
build-gpu/fuselm plan -m "$M" --dtype bf16 --json > /tmp/rules.json 2>/tmp/plan.err || cat /tmp/plan.err
python3 -c "
import json; d=json.load(open('/tmp/rules.json')); print('rules attention', d['decode']['attention']['kernel'], d['decode']['attention']['split_tokens'])
d['decode']['attention']['kernel']='mma_c8'; json.dump(d, open('/tmp/c8.json','w'))"
for r in 1 2; do
  for arm in d0 d1 c8; do
    env=FUSELM_LAB_DEEP=1; plan=(--plan /tmp/rules.json)
    [ $arm = d0 ] && env=FUSELM_LAB_DEEP=0
    [ $arm = c8 ] && plan=(--plan /tmp/c8.json)
    env $env timeout 60 build-gpu/fuselm bench -m "$M" --device cuda --dtype bf16 --scenario latency --reps 2 -q --no-peak "${plan[@]}" --json $OUT/ab/lat-$arm-$r.json > /tmp/l.txt 2>&1 || tail -3 /tmp/l.txt
    env $env timeout 60 build-gpu/fuselm bench -m "$M" --device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2 -q --no-peak "${plan[@]}" --json $OUT/ab/b16-$arm-$r.json > /tmp/t.txt 2>&1 || tail -3 /tmp/t.txt
    python3 -c "
import json,sys
a=json.load(open(sys.argv[1]))['scenarios']['latency']['decode_tok_s']; b=json.load(open(sys.argv[2]))['scenarios']['throughput'][0]['output_tok_s']
print(sys.argv[3], 'b1', round(a,1), 'b16', round(b,1))" $OUT/ab/lat-$arm-$r.json $OUT/ab/b16-$arm-$r.json "$arm round $r"
  done
done
echo "total $((SECONDS-start)) s"
