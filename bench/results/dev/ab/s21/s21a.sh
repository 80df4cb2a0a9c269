#!/usr/bin/env bash
# Session 21 (a): the GPU tests the two review commits of session 20 touch (host side: submit_sample
# checks its samplers once; the batch runner's retiring list), then plan-edit A/Bs that need no code:
#  - 1B decode attention: the cluster cut (mma_c8) and its stacked forms (one CTA per cluster item
#    from 4 / 16 sequences a launch) against one CTA per split, batch 1 and batch 16. Session 12
#    measured clusters +2.5% at batch 1, -7% at batch 16, before the stacked kernel existed.
#    Prediction: mma_c8_s16 keeps the +2.5% at batch 1 and the stacked kernel at batch 16 is within
#    a few % of one CTA per split.
#  - 8B: the LM head balanced over the SMs at one token. Prediction: within +-0.3%.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_fused_engine_test gpu_cuda_engine_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
for t in fused_engine cuda_engine; do
  timeout 200 build-gpu/tests/gpu_${t}_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
done
echo "tests $((SECONDS-start)) s"
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
T16="--device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2"
A=plan:decode.attention.kernel
timeout 150 bash scripts/gpu-ab.sh llama-3.2-1b 2 rules c8:$A=mma_c8 c8s16:$A=mma_c8_s16 c8s4:$A=mma_c8_s4 -- $LAT 2>&1 | grep -v "^=="
echo "1b latency $((SECONDS-start)) s"
rm -f bench/results/dev/ab/llama-3.2-1b-*.json.t; mkdir -p /tmp/ab1 && mv bench/results/dev/ab/llama-3.2-1b-* /tmp/ab1/ 2>/dev/null; cp /tmp/ab1/*.plan.json bench/results/dev/ab/ 2>/dev/null
timeout 120 bash scripts/gpu-ab.sh llama-3.2-1b 2 b16rules b16c8s16:$A=mma_c8_s16 b16c8s4:$A=mma_c8_s4 -- $T16 2>&1 | grep -v "^=="
echo "1b b16 $((SECONDS-start)) s"
timeout 130 bash scripts/gpu-ab.sh llama-3.1-8b 2 rules lmbal:plan:decode.gemm.lm_head.single_token_balance_sms=true -- $LAT 2>&1 | grep -v "^=="
mkdir -p $OUT/s21a && cp /tmp/ab1/*.json bench/results/dev/ab/*.json $OUT/s21a/ 2>/dev/null
echo "total $((SECONDS-start)) s"
