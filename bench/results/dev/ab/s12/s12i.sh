#!/usr/bin/env bash
# Session 12 (i): every GPU test, timeline, --compare, batch 16 (the final run of the session).
set -uo pipefail
export FUSELM_COMMIT=$(cat .commit)
C=$FUSELM_COMMIT
start=$SECONDS
FUSELM_MODELS_DIR=$PWD/.gpu-models FUSELM_GPU_CHECK_BUDGET=0 bash scripts/gpu-check.sh 2>&1 | tail -30
echo "check $((SECONDS-start)) s"
source scripts/gpu-env.sh
cmake --build build-gpu -j 16 --target fuselm gpu_decode_timeline_test > /tmp/b.log 2>&1 || tail -20 /tmp/b.log
R=bench/results/dev; mkdir -p $R/decode-timeline
build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" > $R/decode-timeline/$C.txt
grep -v "us after" $R/decode-timeline/$C.txt | awk '{print $2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13}'
for s in llama-3.1-8b llama-3.2-1b; do
  timeout 200 build-gpu/fuselm bench -m "synthetic:$s?vocab=32000" --device cuda --dtype bf16 --scenario latency \
    --compare baseline,fused --reps 3 -q --json bench/results/h200-$s-compare.json --markdown bench/results/h200-$s-compare.md > /tmp/c.txt 2>&1
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); c=d['compare']
print(sys.argv[2], 'fused', round(c['fused']['scenarios']['latency']['decode_tok_s'],1), 'baseline', round(c['baseline']['scenarios']['latency']['decode_tok_s'],1), 'speedup', round(c['speedup']['decode'],3), 'copy', (d.get('peak_bandwidth') or d.get('environment',{}).get('peak_bandwidth') or {}).get('copy_kernel_vs_memcpy'))
" bench/results/h200-$s-compare.json $s || tail -5 /tmp/c.txt
  timeout 100 build-gpu/fuselm bench -m "synthetic:$s?vocab=32000" --device cuda --dtype bf16 --scenario throughput \
    --batches 16 --reps 3 -q --no-peak --json $R/b16-$s-$C.json > /tmp/t.txt 2>&1
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
print(sys.argv[2], 'b16 output tok/s', round(d['scenarios']['throughput'][0]['output_tok_s'],1))
" $R/b16-$s-$C.json $s || tail -5 /tmp/t.txt
done
echo "bench $((SECONDS-start)) s"
wait
echo "total $((SECONDS-start)) s"
tar czf $OUT/results.tar.gz bench/results
