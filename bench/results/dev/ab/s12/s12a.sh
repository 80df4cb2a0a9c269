#!/usr/bin/env bash
# Session 12 (a): decode attention warms the O projection's weights in L2 (LAB FUSELM_LAB_ATTN_L2:
# 0 none, 1 after its wait, 2 at its start): timelines, then batch-1 latency A/B in turns, batch 16.
set -uo pipefail
C=$(cat .commit)
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_decode_timeline_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
mkdir -p $OUT/tl
for a in 0 1 2; do
  FUSELM_LAB_ATTN_L2=$a build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" > $OUT/tl/$C-a$a.txt
  echo "== arm $a"; grep -v "us after" $OUT/tl/$C-a$a.txt | awk '{print $2,$3,$4,$5,$7,$9,$10,$11,$15,$16}'
done
echo "timelines $((SECONDS-start)) s"
for s in llama-3.2-1b llama-3.1-8b; do
  timeout 240 bash scripts/gpu-ab.sh $s 2 a0:FUSELM_LAB_ATTN_L2=0 a1:FUSELM_LAB_ATTN_L2=1 a2:FUSELM_LAB_ATTN_L2=2 -- --device cuda --dtype bf16 --scenario latency --reps 2 2>&1 | grep -v "^=="
  echo "ab $s $((SECONDS-start)) s"
done
mkdir -p $OUT/ab && cp bench/results/dev/ab/*.json $OUT/ab/ 2>/dev/null
echo "total $((SECONDS-start)) s"
