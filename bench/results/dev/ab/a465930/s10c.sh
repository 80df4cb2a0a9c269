#!/usr/bin/env bash
# Session 10 (c): decode attention with 2 K/V stages (68 KB at head_dim 128) against 3 (100 KB).
set -uo pipefail
C=$(cat .commit); export FUSELM_COMMIT=$C
source scripts/gpu-env.sh
start=$SECONDS
[ -d build-gpu ] || cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > /tmp/cfg.log 2>&1
cmake --build build-gpu -j 16 --target fuselm gpu_attention_test gpu_decode_timeline_test gpu_fused_decode_test gpu_fused_engine_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
R=bench/results/dev; mkdir -p $R/decode-timeline $R/ab/$C
for t in gpu_fused_decode_test gpu_fused_engine_test; do
  build-gpu/tests/$t 2>&1 | grep -E "^\[  (PASSED|FAILED)|FAILED  \]" | head -8
done
FUSELM_LAB_ATTN_STAGES=2 build-gpu/tests/gpu_fused_engine_test 2>&1 | grep -E "^\[  (PASSED|FAILED)|FAILED  \]" | head -4
echo "tests $((SECONDS-start)) s"
for cfg in s3: s2:FUSELM_LAB_ATTN_STAGES=2; do
  IFS=: read name envs <<< "$cfg"
  env $envs build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" > $R/decode-timeline/$C-$name.txt
  echo "== timeline $name"; grep -v "us after" $R/decode-timeline/$C-$name.txt | awk '{print $2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13}'
done
echo "labs $((SECONDS-start)) s"
for round in 1 2; do
for cfg in s3: s2:FUSELM_LAB_ATTN_STAGES=2; do
for s in llama-3.1-8b llama-3.2-1b; do
  IFS=: read name envs <<< "$cfg"
  env $envs timeout 60 build-gpu/fuselm bench -m "synthetic:$s?vocab=32000" --device cuda --dtype bf16 --scenario latency \
    --reps 3 -q --no-peak --json $R/ab/$C/$s-$name-$round.json > /tmp/ab.txt 2>&1
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); sc=d['scenarios']
print(sys.argv[2], sys.argv[3], 'round', sys.argv[4], 'b1 decode', round(sc['latency']['decode_tok_s'],1))
" $R/ab/$C/$s-$name-$round.json $s $name $round || tail -3 /tmp/ab.txt
done; done; done
echo "total $((SECONDS-start)) s"
tar czf $OUT/results.tar.gz bench/results/dev
