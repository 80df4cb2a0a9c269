#!/usr/bin/env bash
# Session 11 (b): decode attention's prologue before the wait: all stages, none, stage 0 only (LAB switch), timeline x2 each.
set -uo pipefail
C=$(cat .commit)
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target gpu_decode_timeline_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
mkdir -p $OUT/tl
for i in 1 2; do
  for a in 0 1 2; do
    FUSELM_LAB_ATTN=$a build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" > $OUT/tl/$C-a$a-$i.txt
    echo "== arm $a round $i"; grep -E " (attention|o) " $OUT/tl/$C-a$a-$i.txt | awk '{$1="";print}'
  done
done
echo "total $((SECONDS-start)) s"
