#!/usr/bin/env bash
# Session 17 (f): the 8B batch-16 GEMM cut for 2+ tokens: o and down on rt2_w4_k8_cta (the tuner's
# isolated pick for o; 8 row tiles a CTA, not grouped since one token keeps the warp twin rt1_w8), qkv
# on rt2_w4_k4_cta, against the rules (rt1_w4_k8_cta, rt1_w4_k4_cta). Same classes: one-token bits unchanged.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
OD="plan:decode.gemm.o.variant=rt2_w4_k8_cta,plan:decode.gemm.down.variant=rt2_w4_k8_cta"
Q="plan:decode.gemm.qkv.variant=rt2_w4_k4_cta"
timeout 90 bash scripts/gpu-ab.sh llama-3.1-8b 2 rules16 od16:$OD q16:$Q -- --device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2 2>&1 | grep -E "16-[12] "
tar czf $OUT/ab.tar.gz bench/results/dev/ab/*.json bench/results/dev/ab/*.log 2>/dev/null
echo "total $((SECONDS-start)) s"
