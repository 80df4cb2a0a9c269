#!/usr/bin/env bash
# Session 16 (b): the register pipeline (skinny GEMM weights straight into registers). Its GPU tests
# (and the engine's with it in tile groups), then plan-file A/B in the step: one-token gate/up and LM
# head on the register pipeline (g), plus qkv/o/down one-token (a), gate/up and LM head on it for every
# token count, so their weights are packed in tile groups (m: batch 1 against g isolates the groups;
# m16: batch 16 against the rules); the QKV projection letting attention launch as it starts (t,
# lab switch FUSELM_LAB_QKV_TRIGGER); timelines.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_skinny_gemm_test gpu_plan_kernels_test gpu_decode_timeline_test gpu_fused_engine_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a bench/lab/read_pattern_probe.cu -o /tmp/rpp && /tmp/rpp > $OUT/read-pattern.txt 2>&1
grep -E "peak|s8 c1024 d4|plain g448" $OUT/read-pattern.txt | tail -7
timeout 150 build-gpu/tests/gpu_skinny_gemm_test --gtest_filter='SkinnyGemm.*' 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure|rt1_w|tests ran" | head -30
timeout 60 build-gpu/tests/gpu_plan_kernels_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" | head
timeout 120 build-gpu/tests/gpu_fused_engine_test --gtest_filter='*Register*:*QkvTrigger*:*BatchInvariant*' 2>&1 | grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|differing" | head
echo "tests $((SECONDS-start)) s"
G8="plan:decode.gemm.gate_up.single_token_variant=rt1_w8_k2_reg,plan:decode.gemm.lm_head.single_token_variant=rt1_w8_k2_reg"
A8="$G8,plan:decode.gemm.qkv.single_token_variant=rt1_w4_k4_reg,plan:decode.gemm.o.single_token_variant=rt1_w4_k8_reg,plan:decode.gemm.down.single_token_variant=rt1_w4_k8_reg"
M8="$G8,plan:decode.gemm.gate_up.variant=rt1_w8_k2_reg,plan:decode.gemm.lm_head.variant=rt1_w8_k2_reg"
G1="plan:decode.gemm.gate_up.single_token_variant=rt1_w4_k2_reg,plan:decode.gemm.lm_head.single_token_variant=rt1_w8_k2_reg"
M1="$G1,plan:decode.gemm.gate_up.variant=rt1_w4_k2_reg,plan:decode.gemm.lm_head.variant=rt1_w8_k2_reg"
A1="$G1,plan:decode.gemm.qkv.single_token_variant=rt1_w4_k8_reg,plan:decode.gemm.o.single_token_variant=rt1_w4_k8_reg,plan:decode.gemm.down.single_token_variant=rt1_w4_k8_reg"
timeout 240 bash scripts/gpu-ab.sh llama-3.1-8b 3 rules g:$G8 a:$A8 m:$M8 t:FUSELM_LAB_QKV_TRIGGER=1 -- --device cuda --dtype bf16 --scenario latency --reps 2 2>&1 | grep -v "^=="
echo "ab8 $((SECONDS-start)) s"
timeout 200 bash scripts/gpu-ab.sh llama-3.2-1b 3 rules g:$G1 a:$A1 m:$M1 -- --device cuda --dtype bf16 --scenario latency --reps 2 2>&1 | grep -v "^=="
echo "ab1 $((SECONDS-start)) s"
timeout 120 bash scripts/gpu-ab.sh llama-3.1-8b 2 rules16 m16:$M8 -- --device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2 2>&1 | grep -v "^==" | grep -v "latency tok/s.*-"
echo "ab16 $((SECONDS-start)) s"
for s in llama-3.1-8b llama-3.2-1b; do for arm in m rules; do
  p=bench/results/dev/ab/$s-$arm.plan.json; [ -f $p ] || p=""
  FUSELM_TIMELINE_SHAPE=$s FUSELM_TIMELINE_PLAN=$p timeout 60 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" | grep -v "us after" | sed "s/^/$arm /" | tee -a $OUT/timeline.txt
done; done
FUSELM_LAB_QKV_TRIGGER=1 FUSELM_TIMELINE_SHAPE=llama-3.1-8b timeout 60 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" | grep -v "us after" | sed "s/^/t /" | tee -a $OUT/timeline.txt
tar czf $OUT/ab.tar.gz bench/results/dev/ab/*.json bench/results/dev/ab/*.log 2>/dev/null
echo "total $((SECONDS-start)) s"
