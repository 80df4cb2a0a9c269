#!/usr/bin/env bash
# A/B: decode attention ranks 1 vs 8 (FUSELM_LAB_DECODE_RANKS), b1 latency and b16 throughput, in turns.
set -uo pipefail
source scripts/gpu-env.sh
export FUSELM_COMMIT=$(cat .commit)
res=$OUT/res; mkdir -p $res
start=$SECONDS
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real \
  -DFUSELM_MODELS_DIR=$PWD/.gpu-models >/dev/null 2>&1
cmake --build build-gpu -j 16 --target fuselm gpu_attention_test gpu_decode_timeline_test > $res/build.log 2>&1 || { tail -30 $res/build.log; exit 1; }
echo "build $((SECONDS-start)) s"
timeout 100 build-gpu/tests/gpu_attention_test > $res/test-attention.log 2>&1; echo "attention rc=$? $(grep -c '^\[       OK' $res/test-attention.log) ok"
for r in 8 1; do
  FUSELM_LAB_DECODE_RANKS=$r build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" > $res/timeline-r$r.txt
done
cat $res/timeline-r8.txt
for round in 1 2; do
for r in 8 1; do
for s in llama-3.1-8b llama-3.2-1b; do
  FUSELM_LAB_DECODE_RANKS=$r timeout 100 build-gpu/fuselm bench -m "synthetic:$s?vocab=32000" --device cuda --dtype bf16 --scenario latency,throughput \
    --batches 16 --reps 3 -q --no-peak --json $res/ab-r$r-$s-$round.json > $res/ab-r$r-$s-$round.txt 2>&1
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); sc=d['scenarios']
print(sys.argv[2], 'ranks', sys.argv[3], 'round', sys.argv[4], 'b1 decode', round(sc['latency']['decode_tok_s'],1), 'b16 output', round(sc['throughput'][0]['output_tok_s'],1))
" $res/ab-r$r-$s-$round.json $s $r $round || tail -3 $res/ab-r$r-$s-$round.txt
done; done; done
echo "total $((SECONDS-start)) s"
tar czf $OUT/res.tar.gz -C $OUT res
