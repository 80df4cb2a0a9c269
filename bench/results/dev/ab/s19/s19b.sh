#!/usr/bin/env bash
# Session 19 (b): grids spread evenly over the SMs, and a 7-tile CTA for the 8B gate/up.
# s19a's per-SM record: the 8B gate/up (448 CTAs, clusters of 4) ran four CTAs on 89 SMs (their last
# end 54.7 us on average), three on 23 (51.0), two on 10 (49.3), none on ~9; the 1B gate/up (512
# CTAs, clusters of 2) six on 62 SMs (19.3) where 3.9 is the average; the 8B qkv four on 68 SMs
# (14.4) and two on 49 (12.3). balance_sms pads shared memory so that at most ceil(CTAs / SMs) fit.
# Arms (plan files): qkvb / gub / allb = balance on qkv / gate_up / every decode GEMM; w7 = the 8B
# gate/up on rt1_w7_k2_cta (512 CTAs in clusters of 2: four on 128 SMs, 1.83 MB an SM against 2.1).
# Predictions: 1B gub +3-5% at batch 1 (gate_up 21.5 -> ~18 us), 8B qkvb +0.5-1%, w7 +1-3% at
# batch 1 (gate_up 59 -> ~55 us) if an SM's share of bandwidth, not its CTAs' bytes in flight, sets
# its pace; nothing if the latter.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_fused_engine_test gpu_decode_timeline_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
timeout 100 build-gpu/tests/gpu_fused_engine_test --gtest_filter='*TileGroup*' 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure|differ" | head -10
echo "tests $((SECONDS-start)) s"
B=true
W7="plan:decode.gemm.gate_up.variant=rt1_w7_k2_cta,plan:decode.gemm.gate_up.single_token_variant=rt1_w7_k2_cta"
ALL="plan:decode.gemm.qkv.balance_sms=$B,plan:decode.gemm.o.balance_sms=$B,plan:decode.gemm.gate_up.balance_sms=$B,plan:decode.gemm.down.balance_sms=$B,plan:decode.gemm.lm_head.balance_sms=$B"
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
timeout 200 bash scripts/gpu-ab.sh llama-3.1-8b 2 rules qkvb:plan:decode.gemm.qkv.balance_sms=$B allb:$ALL w7:$W7 \
    w7qkvb:$W7,plan:decode.gemm.qkv.balance_sms=$B -- $LAT 2>&1 | grep -v "^=="
echo "8B $((SECONDS-start)) s"
timeout 100 bash scripts/gpu-ab.sh llama-3.2-1b 2 rules gub:plan:decode.gemm.gate_up.balance_sms=$B allb:$ALL -- $LAT 2>&1 | grep -v "^=="
echo "1B $((SECONDS-start)) s"
for arm in allb w7qkvb; do
  FUSELM_TIMELINE_SHAPE=llama-3.1-8b FUSELM_TIMELINE_PLAN=bench/results/dev/ab/llama-3.1-8b-$arm.plan.json timeout 50 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" | grep -v "us after" | sed "s/^/$arm /" | tee -a $OUT/timeline.txt
done
FUSELM_TIMELINE_SHAPE=llama-3.2-1b FUSELM_TIMELINE_PLAN=bench/results/dev/ab/llama-3.2-1b-allb.plan.json timeout 40 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" | grep -v "us after" | sed "s/^/allb /" | tee -a $OUT/timeline.txt
tar czf $OUT/ab.tar.gz bench/results/dev/ab/*.json 2>/dev/null
echo "total $((SECONDS-start)) s"
