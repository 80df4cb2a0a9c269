#!/usr/bin/env bash
# Session 12 (e): (1) LAB FUSELM_LAB_FIVE: a one-token warp pipeline whose K range is exactly four
# stages gets five (all in flight before the wait; 1B O projection); (2) 1B decode attention in
# clusters of 8 (rules now) against one CTA per split (plan file): batch 1, batch 16 at prompts 128
# and 512, depth 4096 and 16384.
set -uo pipefail
C=$(cat .commit)
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_decode_timeline_test gpu_skinny_gemm_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
build-gpu/tests/gpu_skinny_gemm_test 2>&1 | grep -E "^\[  (PASSED|FAILED)|FAILED" | head -8
mkdir -p $OUT/tl $OUT/ab
for a in 0 1; do
  FUSELM_LAB_FIVE=$a build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" > $OUT/tl/$C-five$a.txt
  echo "== five $a"; grep -v "us after" $OUT/tl/$C-five$a.txt | grep "llama-3.2-1b      1" | awk '{print $2,$3,$4,$5,$6,$7,$9,$10,$11,$15,$16}'
done
echo "timelines $((SECONDS-start)) s"
M="synthetic:llama-3.2-1b?vocab=32000"
build-gpu/fuselm plan -m "$M" --dtype bf16 --json > /tmp/rules.json 2>/tmp/plan.err || cat /tmp/plan.err
python3 -c "
import json; d=json.load(open('/tmp/rules.json')); print('rules attention', d['decode']['attention']['kernel'])
d['decode']['attention']['kernel']='mma'; json.dump(d, open('/tmp/mma.json','w'))"
B="build-gpu/fuselm bench -m $M --device cuda --dtype bf16 -q --no-peak"
for r in 1 2; do
  for arm in f0 f1 mma; do
    env=FUSELM_LAB_FIVE=1; plan=(--plan /tmp/rules.json)
    [ $arm = f0 ] && env=FUSELM_LAB_FIVE=0
    [ $arm = mma ] && plan=(--plan /tmp/mma.json)
    env $env timeout 60 $B --scenario latency --reps 2 "${plan[@]}" --json $OUT/ab/lat-$arm-$r.json > /tmp/l.txt 2>&1 || tail -3 /tmp/l.txt
    [ $arm = f0 ] && { python3 -c "
import json,sys; print(sys.argv[2], 'b1', round(json.load(open(sys.argv[1]))['scenarios']['latency']['decode_tok_s'],1))" $OUT/ab/lat-$arm-$r.json "$arm round $r"; continue; }
    env $env timeout 60 $B --scenario throughput --batches 16 --reps 2 "${plan[@]}" --json $OUT/ab/b16-$arm-$r.json > /tmp/t.txt 2>&1 || tail -3 /tmp/t.txt
    env $env timeout 60 $B --scenario throughput --batches 16 --batch-prompt-len 512 --reps 2 "${plan[@]}" --json $OUT/ab/b16p512-$arm-$r.json > /tmp/t.txt 2>&1 || tail -3 /tmp/t.txt
    [ $r = 1 ] && { env $env timeout 120 $B --scenario depth --depths 4096,16384 "${plan[@]}" --json $OUT/ab/depth-$arm.json > /tmp/d.txt 2>&1 || tail -3 /tmp/d.txt; }
    python3 -c "
import json,sys
o=sys.argv[1]; arm=sys.argv[2]; r=sys.argv[3]
a=json.load(open(f'{o}/lat-{arm}-{r}.json'))['scenarios']['latency']['decode_tok_s']
b=json.load(open(f'{o}/b16-{arm}-{r}.json'))['scenarios']['throughput'][0]['output_tok_s']
c=json.load(open(f'{o}/b16p512-{arm}-{r}.json'))['scenarios']['throughput'][0]['output_tok_s']
d=''
try:
  d=[(x['depth'], round(x['decode_tok_s'],1)) for x in json.load(open(f'{o}/depth-{arm}.json'))['scenarios']['depth']]
except Exception: pass
print(arm, 'round', r, 'b1', round(a,1), 'b16@128', round(b,1), 'b16@512', round(c,1), 'depth', d)" $OUT/ab $arm $r
  done
done
echo "total $((SECONDS-start)) s"
