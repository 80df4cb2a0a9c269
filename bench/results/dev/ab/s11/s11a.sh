#!/usr/bin/env bash
# Session 11 (a): the decode timeline with the detail marks (attention before its wait, cluster GEMM tails).
set -uo pipefail
C=$(cat .commit)
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target gpu_decode_timeline_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
R=bench/results/dev/decode-timeline; mkdir -p $R $OUT/tl
for i in 1 2; do
  build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" > $OUT/tl/$C-$i.txt
  grep -v "us after" $OUT/tl/$C-$i.txt | awk '{$1="";print}' | column -t
done
build-gpu/tests/gpu_decode_timeline_test --gtest_filter='*Ordered*' 2>&1 | tail -3
echo "total $((SECONDS-start)) s"
