#!/usr/bin/env bash
# Session 9: warp item window + one-split direct write: correctness, labs, timeline, A/B of the 8B attention kernel.
set -uo pipefail
C=$(cat .commit); export FUSELM_COMMIT=$C
source scripts/gpu-env.sh
start=$SECONDS
[ -d build-gpu ] || cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > /tmp/cfg.log 2>&1
cmake --build build-gpu -j 16 --target fuselm gpu_attention_test gpu_decode_timeline_test gpu_fused_decode_test gpu_fused_engine_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
for t in gpu_attention_test gpu_fused_decode_test gpu_fused_engine_test; do
  FUSELM_MODELS_DIR=$PWD/.gpu-models build-gpu/tests/$t 2>&1 | grep -E "^\[  (PASSED|FAILED)|FAILED  \]" | head -8
done
R=bench/results/dev; mkdir -p $R/attention-lab $R/decode-timeline $R/ab/$C
build-gpu/tests/gpu_attention_test --gtest_also_run_disabled_tests --gtest_filter='*DecodeClusters*' 2>&1 | grep "^\[bench\]" > $R/attention-lab/$C-clusters.txt
grep -E "shape|  (1|16|64) +520 " $R/attention-lab/$C-clusters.txt
build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" > $R/decode-timeline/$C.txt
grep -v "us after" $R/decode-timeline/$C.txt | awk '{print $2,$3,$4,$12,$13}'
echo "labs $((SECONDS-start)) s"
for round in 1 2; do
for cfg in 8b-c8:llama-3.1-8b:.lab/p8-c8.json 8b-c1:llama-3.1-8b:.lab/p8-c1.json 1b:llama-3.2-1b:; do
  IFS=: read name s plan <<< "$cfg"
  extra=""; [ -n "$plan" ] && extra="--plan $plan"
  timeout 90 build-gpu/fuselm bench -m "synthetic:$s?vocab=32000" --device cuda --dtype bf16 --scenario latency,throughput \
    --batches 16 --reps 3 -q --no-peak $extra --json $R/ab/$C/$name-$round.json > /tmp/ab.txt 2>&1
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); sc=d['scenarios']
print(sys.argv[2], 'round', sys.argv[3], 'b1 decode', round(sc['latency']['decode_tok_s'],1), 'b16 output', round(sc['throughput'][0]['output_tok_s'],1))
" $R/ab/$C/$name-$round.json $name $round || tail -3 /tmp/ab.txt
done; done
echo "total $((SECONDS-start)) s"
tar czf $OUT/results.tar.gz bench/results/dev
