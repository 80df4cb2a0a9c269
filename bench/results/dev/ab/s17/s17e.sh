#!/usr/bin/env bash
# Session 17 (e): the tuner's pick for the 8B down projection, rt2_w4_k8_cta at every m (8 row tiles a
# CTA: in tile groups, one token on the CTA pipeline), in the step against the rules (warp twin rt1_w8
# for one token, rt1_w4_k8_cta ungrouped for more).
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
D="plan:decode.gemm.down.variant=rt2_w4_k8_cta,plan:decode.gemm.down.single_token_variant=rt2_w4_k8_cta"
timeout 80 bash scripts/gpu-ab.sh llama-3.1-8b 3 rules d:$D -- --device cuda --dtype bf16 --scenario latency --reps 2 2>&1 | grep -v "^=="
timeout 50 bash scripts/gpu-ab.sh llama-3.1-8b 2 rules16 d16:$D -- --device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2 2>&1 | grep -E "16-[12] "
tar czf $OUT/ab.tar.gz bench/results/dev/ab/*.json bench/results/dev/ab/*.log 2>/dev/null
echo "total $((SECONDS-start)) s"
