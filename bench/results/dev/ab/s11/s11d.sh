#!/usr/bin/env bash
# Session 11 (d): decode attention with compact loads (SASS 126 -> 67 KB): timeline x2, attention decode tests.
set -uo pipefail
C=$(cat .commit)
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target gpu_decode_timeline_test gpu_attention_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
mkdir -p $OUT/tl
for i in 1 2; do
  build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" > $OUT/tl/$C-$i.txt
  echo "== round $i"; grep -v "us after" $OUT/tl/$C-$i.txt | awk '{$1="";print}'
done
build-gpu/tests/gpu_attention_test --gtest_filter='*Decode*' 2>&1 | tail -4
build-gpu/tests/gpu_decode_timeline_test 2>&1 | tail -2
echo "total $((SECONDS-start)) s"
