#!/usr/bin/env bash
# A/B: weight stream evict-first (build-gpu) vs none (build-nohint), decode ranks 8 vs 1; b1 latency + b16.
set -uo pipefail
source scripts/gpu-env.sh
export FUSELM_COMMIT=$(cat .commit)
res=$OUT/res; mkdir -p $res
start=$SECONDS
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real \
  -DFUSELM_MODELS_DIR=$PWD/.gpu-models >/dev/null 2>&1
cmake --build build-gpu -j 16 --target fuselm gpu_attention_test gpu_fused_decode_test gpu_fused_engine_test gpu_decode_timeline_test > $res/build.log 2>&1 || { tail -30 $res/build.log; exit 1; }
echo "build $((SECONDS-start)) s"
cmake -S . -B build-nohint -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real \
  -DCMAKE_CUDA_FLAGS=-DFUSELM_LAB_NO_WEIGHT_HINT >/dev/null 2>&1
cmake --build build-nohint -j 16 --target fuselm > $res/build2.log 2>&1 || { tail -30 $res/build2.log; exit 1; }
echo "build2 $((SECONDS-start)) s"
for t in attention fused_decode fused_engine; do
  timeout 200 build-gpu/tests/gpu_${t}_test > $res/test-$t.log 2>&1; echo "test $t rc=$? $(grep -c '^\[       OK' $res/test-$t.log) ok, failed: $(grep '^\[  FAILED  \]' $res/test-$t.log | head -5 | tr '\n' ' ')"
done
FUSELM_LAB_DECODE_RANKS=8 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" > $res/timeline.txt
cat $res/timeline.txt | grep -v "us after"
for round in 1 2; do
for cfg in hint:build-gpu:8 nohint:build-nohint:8 hint:build-gpu:1; do
  IFS=: read name b r <<< "$cfg"
  for s in llama-3.1-8b llama-3.2-1b; do
    FUSELM_LAB_DECODE_RANKS=$r timeout 100 $b/fuselm bench -m "synthetic:$s?vocab=32000" --device cuda --dtype bf16 --scenario latency,throughput \
      --batches 16 --reps 3 -q --no-peak --json $res/ab-$name-r$r-$s-$round.json > $res/ab-$name-r$r-$s-$round.txt 2>&1
    python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); sc=d['scenarios']
print(sys.argv[2], sys.argv[3], 'round', sys.argv[4], 'b1 decode', round(sc['latency']['decode_tok_s'],1), 'b16 output', round(sc['throughput'][0]['output_tok_s'],1))
" $res/ab-$name-r$r-$s-$round.json $s "$name-r$r" $round || tail -3 $res/ab-$name-r$r-$s-$round.txt
  done
done; done
echo "total $((SECONDS-start)) s"
tar czf $OUT/res.tar.gz -C $OUT res
