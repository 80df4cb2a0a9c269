#!/usr/bin/env bash
# Session 18 (b): a 7-warp CTA shape for the 8B gate/up (rt2_w7_k4_cta: 14 row tiles a CTA, K split
# in four; weights in tile groups of 14, one 7 KB copy a stage). The 8B gate/up has 1,792 row tiles
# (28,672 rows): 16-tile CTAs (rt2_w8_k4_cta, the rule) make 448 CTAs, four on 52 SMs and three on 80,
# and its timeline (d7e94dc) has the first CTA end at 44.0 us and the last at 59.0; 14-tile CTAs make
# 512 (four on 116 SMs, three on 16). The session-16 read probe streamed the same matrix 5% faster
# with 396 or 528 CTAs than with 448 (1 KB copies). Prediction: the 8B gate/up 59.0 -> ~56.5 us a
# layer, batch 1 ~+2% (253 -> ~258 tok/s), batch 16 ~+1.5%; the first and last CTA ends closer.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_skinny_gemm_test gpu_plan_kernels_test gpu_fused_engine_test gpu_decode_timeline_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
timeout 200 build-gpu/tests/gpu_skinny_gemm_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure|differ|tests ran" | head -20
timeout 100 build-gpu/tests/gpu_plan_kernels_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" | head -10
timeout 100 build-gpu/tests/gpu_fused_engine_test --gtest_filter='*TileGroup*:*Invarian*' 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" | head -10
echo "tests $((SECONDS-start)) s"
W7="plan:decode.gemm.gate_up.variant=rt2_w7_k4_cta,plan:decode.gemm.gate_up.single_token_variant=rt2_w7_k4_cta"
timeout 100 bash scripts/gpu-ab.sh llama-3.1-8b 3 rules w7:$W7 -- --device cuda --dtype bf16 --scenario latency --reps 2 2>&1 | grep -v "^=="
timeout 80 bash scripts/gpu-ab.sh llama-3.1-8b 2 rules16 w716:$W7 -- --device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2 2>&1 | grep -E "16-[12] "
for arm in rules w7; do
  p=bench/results/dev/ab/llama-3.1-8b-$arm.plan.json; [ -f $p ] || p=""
  FUSELM_TIMELINE_SHAPE=llama-3.1-8b FUSELM_TIMELINE_PLAN=$p timeout 60 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" | grep -v "us after" | sed "s/^/$arm /" | tee -a $OUT/timeline.txt
done
tar czf $OUT/ab.tar.gz bench/results/dev/ab/*.json 2>/dev/null
echo "total $((SECONDS-start)) s"
