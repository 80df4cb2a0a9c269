#!/usr/bin/env bash
# Session 18 (c): two latency chains at the start and end of the normed/QKV decode GEMMs, against a
# build of the previous commit (.lab/old.tar.gz: its src and CMakeLists.txt; arm "old", AB_BIN).
# 1. norm_rstd summed a warp's tokens one at a time, one round trip each, before the K loop could
#    start: at 16 tokens the 8B qkv's 4-warp CTAs paid four. Now four tokens' loads go out at once
#    (same order of additions: same bits). One-token code unchanged.
# 2. The QKV epilogue looked up its K/V cache blocks (a load whose address needs the position) and
#    computed the rotation's sincosf after the reduction; now both happen right after the K loop,
#    under the reduction's barriers.
# Prediction (timeline d7e94dc): 8B batch-16 qkv first stage 5.1 -> ~4.0 us and epilogue 3.1 -> ~2.3
# us after its start, ~1.5-2 us a layer, batch 16 +1-1.5%; batch 1 qkv end ~0.3 us earlier, +0.2%.
# 3. Arm w73: the 8B gate/up on rt2_w7_k3_cta (14 row tiles a CTA, K in three: 384 CTAs, three on
#    120 SMs and two on 12, where the rule's 448 put four on 52 SMs and three on 80; its first CTA
#    ends at 44 us, its last at 59). Prediction: gate/up ~59 -> ~56 us a layer, batch 1 +2-3%.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
mkdir -p .lab/old && tar xzf .lab/old.tar.gz -C .lab/old
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake -S .lab/old -B build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DBUILD_TESTING=OFF > /tmp/c2.log 2>&1 || tail -20 /tmp/c2.log
cmake --build build-gpu -j 12 --target fuselm gpu_skinny_gemm_test gpu_fused_engine_test gpu_fused_decode_test gpu_decode_timeline_test > /tmp/b.log 2>&1 &
cmake --build build-old -j 6 --target fuselm > /tmp/b2.log 2>&1 || { tail -30 /tmp/b2.log; }
wait
[ -x build-gpu/fuselm ] || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
timeout 200 build-gpu/tests/gpu_skinny_gemm_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure|differ" | head -20
timeout 200 build-gpu/tests/gpu_fused_decode_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" | head -10
timeout 200 build-gpu/tests/gpu_fused_engine_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" | head -10
echo "tests $((SECONDS-start)) s"
OLD="AB_BIN=build-old/fuselm"
W73="plan:decode.gemm.gate_up.variant=rt2_w7_k3_cta,plan:decode.gemm.gate_up.single_token_variant=rt2_w7_k3_cta"
timeout 150 bash scripts/gpu-ab.sh llama-3.1-8b 3 new old:$OLD w73:$W73 -- --device cuda --dtype bf16 --scenario latency --reps 2 2>&1 | grep -v "^=="
timeout 150 bash scripts/gpu-ab.sh llama-3.1-8b 3 new16 old16:$OLD w7316:$W73 -- --device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2 2>&1 | grep -E "16-[123] "
timeout 60 bash scripts/gpu-ab.sh llama-3.2-1b 2 new old:$OLD -- --device cuda --dtype bf16 --scenario latency --reps 2 2>&1 | grep -v "^=="
timeout 60 bash scripts/gpu-ab.sh llama-3.2-1b 2 new16 old16:$OLD -- --device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2 2>&1 | grep -E "16-[12] "
echo "ab $((SECONDS-start)) s"
FUSELM_TIMELINE_SHAPE=llama-3.1-8b timeout 60 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" | grep -v "us after" | grep -E "shape|qkv|gate_up" | sed "s/^/new /" | tee -a $OUT/timeline.txt
FUSELM_TIMELINE_SHAPE=llama-3.1-8b FUSELM_TIMELINE_PLAN=bench/results/dev/ab/llama-3.1-8b-w73.plan.json timeout 60 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" | grep -v "us after" | grep -E "shape|qkv|gate_up" | sed "s/^/w73 /" | tee -a $OUT/timeline.txt
tar czf $OUT/ab.tar.gz bench/results/dev/ab/*.json 2>/dev/null
echo "total $((SECONDS-start)) s"
nvcc -std=c++20 -O3 -Isrc --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a .lab/occ.cu -o /tmp/occ && /tmp/occ | tee $OUT/occupancy.txt
