#!/usr/bin/env bash
# A/B: cluster size and keys per rank (FUSELM_LAB_DECODE_RANKS, FUSELM_LAB_MIN_RANK_KEYS), b1 latency + b16.
set -uo pipefail
source scripts/gpu-env.sh
export FUSELM_COMMIT=$(cat .commit)
res=$OUT/res; mkdir -p $res
start=$SECONDS
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real \
  -DFUSELM_MODELS_DIR=$PWD/.gpu-models >/dev/null 2>&1
cmake --build build-gpu -j 16 --target fuselm > $res/build.log 2>&1 || { tail -30 $res/build.log; exit 1; }
echo "build $((SECONDS-start)) s"
for round in 1 2; do
for cfg in c8k128:8:128 c8k256:8:256 c4k128:4:128 c1:1:128; do
  IFS=: read name r k <<< "$cfg"
  for s in llama-3.1-8b llama-3.2-1b; do
    FUSELM_LAB_DECODE_RANKS=$r FUSELM_LAB_MIN_RANK_KEYS=$k timeout 60 build-gpu/fuselm bench -m "synthetic:$s?vocab=32000" --device cuda --dtype bf16 --scenario latency,throughput \
      --batches 16 --reps 3 -q --no-peak --json $res/ab-$name-$s-$round.json > $res/ab-$name-$s-$round.txt 2>&1
    python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); sc=d['scenarios']
print(sys.argv[2], sys.argv[3], 'round', sys.argv[4], 'b1 decode', round(sc['latency']['decode_tok_s'],1), 'b16 output', round(sc['throughput'][0]['output_tok_s'],1))
" $res/ab-$name-$s-$round.json $s $name $round || tail -3 $res/ab-$name-$s-$round.txt
  done
done; echo "round $round $((SECONDS-start)) s"; done
tar czf $OUT/res.tar.gz -C $OUT res
