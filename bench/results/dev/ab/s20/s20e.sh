#!/usr/bin/env bash
# Session 20 (e): the step's input copy kernel lets the embedding kernel launch early (PDL), which
# lets the first GEMM start only after its own wait (so the kernels that read the inputs before
# they wait still see them). Headline at 9118ce7: 8B 261.7 tok/s fused (3817.6 us traced step).
# Prediction: +1-2 us a step (the embedding's launch hidden behind the copy): +0.05%.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_fused_engine_test gpu_fused_decode_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
for t in fused_engine fused_decode; do
  timeout 300 build-gpu/tests/gpu_${t}_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
done
for s in llama-3.1-8b llama-3.2-1b; do
  timeout 200 build-gpu/fuselm bench -m "synthetic:$s?vocab=32000" --device cuda --dtype bf16 --scenario latency \
      --compare baseline,fused --reps 3 -q --json $OUT/$s-compare.json 2>&1 | grep -E "decode tok/s|speedup" | head -4
done
echo "total $((SECONDS-start)) s"
