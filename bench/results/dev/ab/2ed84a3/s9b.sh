#!/usr/bin/env bash
# Session 9: decode attention item window: correctness, the clusters lab, the step timeline, batch 16.
set -uo pipefail
C=$(cat .commit)
source scripts/gpu-env.sh
[ -d build-gpu ] || cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > /tmp/cfg.log 2>&1
cmake --build build-gpu -j 16 --target fuselm gpu_attention_test gpu_decode_timeline_test gpu_fused_decode_test gpu_fused_engine_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
for t in gpu_attention_test gpu_fused_decode_test gpu_fused_engine_test; do
  FUSELM_MODELS_DIR=$PWD/.gpu-models build-gpu/tests/$t 2>&1 | grep -E "^\[  (PASSED|FAILED)|FAILED  \]" | head -8
done
mkdir -p bench/results/dev/attention-lab bench/results/dev/decode-timeline
build-gpu/tests/gpu_attention_test --gtest_also_run_disabled_tests --gtest_filter='*DecodeClusters*' 2>&1 | grep "^\[bench\]" > bench/results/dev/attention-lab/$C-clusters.txt
grep -E "shape| 16 |  64 " bench/results/dev/attention-lab/$C-clusters.txt | grep -E "shape| 520 " 
build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" > bench/results/dev/decode-timeline/$C.txt
grep -v "us after" bench/results/dev/decode-timeline/$C.txt
for s in llama-3.1-8b llama-3.2-1b; do
  timeout 100 build-gpu/fuselm bench -m "synthetic:$s?vocab=32000" --device cuda --dtype bf16 --scenario throughput \
    --batches 16 --reps 3 -q --no-peak --json bench/results/dev/b16-$s-$C.json > /tmp/t.txt 2>&1
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
print(sys.argv[2], 'b16 output tok/s', round(d['scenarios']['throughput'][0]['output_tok_s'],1))
" bench/results/dev/b16-$s-$C.json $s || tail -5 /tmp/t.txt
done
tar czf $OUT/results.tar.gz bench/results/dev
