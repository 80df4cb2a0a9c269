#!/usr/bin/env bash
# Session 9: timeline + --compare on both shapes (batch 1), batch 16.
set -uo pipefail
C=$(cat .commit); export FUSELM_COMMIT=$C
source scripts/gpu-env.sh
start=$SECONDS
[ -d build-gpu ] || cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > /tmp/cfg.log 2>&1
cmake --build build-gpu -j 16 --target fuselm gpu_decode_timeline_test gpu_attention_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
build-gpu/tests/gpu_attention_test 2>&1 | grep -E "^\[  (PASSED|FAILED)|FAILED  \]" | head -5
R=bench/results; mkdir -p $R/dev/decode-timeline
build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" > $R/dev/decode-timeline/$C.txt
grep -v "us after" $R/dev/decode-timeline/$C.txt | grep -E "shape|attention| o "
for s in llama-3.1-8b llama-3.2-1b; do
  timeout 200 build-gpu/fuselm bench -m "synthetic:$s?vocab=32000" --device cuda --dtype bf16 --scenario latency \
    --compare baseline,fused --reps 3 -q --json $R/h200-$s-compare.json --markdown $R/h200-$s-compare.md > /tmp/c.txt 2>&1
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); c=d['compare']
print(sys.argv[2], 'fused', round(c['fused']['scenarios']['latency']['decode_tok_s'],1), 'baseline', round(c['baseline']['scenarios']['latency']['decode_tok_s'],1), 'speedup', round(c['speedup']['decode'],3), 'copy', (d.get('peak_bandwidth') or d.get('environment',{}).get('peak_bandwidth') or {}).get('copy_kernel_vs_memcpy'))
" $R/h200-$s-compare.json $s || tail -5 /tmp/c.txt
done
echo "total $((SECONDS-start)) s"
tar czf $OUT/results.tar.gz bench/results
