#!/usr/bin/env bash
# Session 15 (b): the stacked decode attention (two teams per CTA): its tests, the lab against
# clusters, then the 8B step with plan files (mma_c8 = the rules, mma_c8_s<N>) in turns.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_attention_test gpu_fused_decode_test gpu_decode_timeline_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
timeout 300 build-gpu/tests/gpu_attention_test --gtest_filter='AttentionDecode*:*DecodeTest*:AttentionSmall.Decode*' > $OUT/tests.txt 2>&1
grep -E "^\[  (FAILED|PASSED) |Failure|differ" $OUT/tests.txt | head -30
timeout 200 build-gpu/tests/gpu_fused_decode_test > $OUT/fused-tests.txt 2>&1; grep -E "^\[  (FAILED|PASSED) " $OUT/fused-tests.txt
echo "tests $((SECONDS-start)) s"
timeout 100 build-gpu/tests/gpu_attention_test --gtest_also_run_disabled_tests --gtest_filter='*DecodeStacked*' 2>&1 | grep "^\[bench\]" > $OUT/stacked-lab.txt
grep -E 'llama3-8b +(16|64) +520' $OUT/stacked-lab.txt
echo "lab $((SECONDS-start)) s"
M="synthetic:llama-3.1-8b?vocab=32000"
build-gpu/fuselm plan -m "$M" --dtype bf16 --json > /tmp/rules.json 2>/tmp/plan.err || cat /tmp/plan.err
mkdir -p /tmp/arms $OUT/ab
python3 - <<'PY'
import json
d = json.load(open('/tmp/rules.json'))
print('rules:', d['decode']['attention'])
for k in ['mma_c8', 'mma_c8_s4', 'mma_c8_s16']:
    e = json.loads(json.dumps(d)); e['decode']['attention']['kernel'] = k
    json.dump(e, open(f'/tmp/arms/{k}.json', 'w'))
PY
run() {  # arm round
  timeout 60 build-gpu/fuselm bench -m "$M" --device cuda --dtype bf16 -q --no-peak --scenario throughput --batches 4,16,64 --reps 2 \
      --plan /tmp/arms/$1.json --json $OUT/ab/$1-$2-tp.json > /tmp/l.txt 2>&1 || tail -3 /tmp/l.txt
  timeout 60 build-gpu/fuselm bench -m "$M" --device cuda --dtype bf16 -q --no-peak --scenario latency --reps 2 \
      --plan /tmp/arms/$1.json --json $OUT/ab/$1-$2-lat.json > /tmp/l.txt 2>&1 || tail -3 /tmp/l.txt
  python3 - $OUT/ab/$1-$2 $1 $2 <<'PY'
import json, sys
p, arm, r = sys.argv[1:4]
try:
    tp = json.load(open(p + '-tp.json'))['scenarios']['throughput']
    lat = json.load(open(p + '-lat.json'))['scenarios']['latency']['decode_tok_s']
    print(f"{arm:<11} {r} b1 {lat:7.1f}  " + "  ".join(f"b{t['batch']} {t['output_tok_s']:7.1f}" for t in tp))
except Exception as e:
    print(arm, r, 'unreadable', e)
PY
}
for r in r1 r2; do for arm in mma_c8 mma_c8_s16; do run $arm $r; done; done
echo "total $((SECONDS-start)) s"
cmake --build build-gpu -j 16 --target gpu_decode_timeline_test > /tmp/b2.log 2>&1 || tail -20 /tmp/b2.log
for arm in mma_c8 mma_c8_s16; do
  echo "timeline $arm"
  FUSELM_TIMELINE_SHAPE=llama-3.1-8b FUSELM_TIMELINE_PLAN=/tmp/arms/$arm.json timeout 120 build-gpu/tests/gpu_decode_timeline_test \
      --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" > $OUT/timeline-$arm.txt
  grep -E " 16 " $OUT/timeline-$arm.txt | awk '{print $2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16}'
done
echo "total $((SECONDS-start)) s"
