#!/usr/bin/env bash
# Session 18 (d), in place of s18c (one call for all, the device time being short): the headline at
# this commit (every GPU test, timeline, --compare, batch 16), then the A/B of s18c: this build
# ("new": norm sums of a warp's tokens loaded together; QKV cache blocks and rotation right after the
# K loop) against a build of 2632f43 ("old", AB_BIN), and arm w73 (the 8B gate/up on rt2_w7_k3_cta).
# Predictions as in s18c.sh: new +1-1.5% at batch 16, +0.2% at batch 1; w73 +2-3% at batch 1.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
mkdir -p .lab/old && tar xzf .lab/old.tar.gz -C .lab/old
cmake -S .lab/old -B build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DBUILD_TESTING=OFF > /tmp/c2.log 2>&1 || tail -20 /tmp/c2.log
(cmake --build build-old -j 4 --target fuselm > /tmp/b2.log 2>&1 || tail -20 /tmp/b2.log) &
OUT=$OUT bash scripts/gpu-headline.sh 2>&1 | tail -36
wait
echo "headline $((SECONDS-start)) s"
OLD="AB_BIN=build-old/fuselm"
W73="plan:decode.gemm.gate_up.variant=rt2_w7_k3_cta,plan:decode.gemm.gate_up.single_token_variant=rt2_w7_k3_cta"
timeout 120 bash scripts/gpu-ab.sh llama-3.1-8b 2 new old:$OLD w73:$W73 -- --device cuda --dtype bf16 --scenario latency --reps 2 2>&1 | grep -v "^=="
timeout 120 bash scripts/gpu-ab.sh llama-3.1-8b 2 new16 old16:$OLD w7316:$W73 -- --device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2 2>&1 | grep -E "16-[12] "
timeout 60 bash scripts/gpu-ab.sh llama-3.2-1b 2 new16 old16:$OLD -- --device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2 2>&1 | grep -E "16-[12] "
echo "ab $((SECONDS-start)) s"
FUSELM_TIMELINE_SHAPE=llama-3.1-8b FUSELM_TIMELINE_PLAN=bench/results/dev/ab/llama-3.1-8b-w73.plan.json timeout 60 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" | grep -v "us after" | grep -E "shape|qkv|gate_up" | sed "s/^/w73 /" | tee -a $OUT/timeline.txt
tar czf $OUT/ab.tar.gz bench/results/dev/ab/*.json 2>/dev/null
nvcc -std=c++20 -O3 -Isrc --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a .lab/occ.cu -o /tmp/occ && /tmp/occ | tee $OUT/occupancy.txt
echo "total $((SECONDS-start)) s"
