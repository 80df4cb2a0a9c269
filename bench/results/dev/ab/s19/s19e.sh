#!/usr/bin/env bash
# Session 19 (e): the GGUF golden test that the headline call (27d5f0c) could not carry, and the
# CTA pipeline with 40 KB of weights in flight a CTA instead of 32 (6 stages of 7 KB, 5 of 8 KB;
# build-time lab switch FUSELM_LAB_CTA_INFLIGHT_KB, a second build run by AB_BIN). A balanced
# (padded) CTA holds 57 KB at four an SM, so the deeper ring costs no residency where the grid is
# spread. Prediction: +0-1% at 8B batch 1 (the gate/up's first and last stages), even elsewhere.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake -S . -B build-alt -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DBUILD_TESTING=OFF -DCMAKE_CUDA_FLAGS=-DFUSELM_LAB_CTA_INFLIGHT_KB=40 > /tmp/c2.log 2>&1 || tail -20 /tmp/c2.log
(cmake --build build-alt -j 8 --target fuselm > /tmp/b2.log 2>&1 || tail -20 /tmp/b2.log) &
cmake --build build-gpu -j 8 --target fuselm gpu_golden_gpu_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
wait
echo "build $((SECONDS-start)) s"
timeout 100 build-gpu/tests/gpu_golden_gpu_test --gtest_filter='*Gguf*' 2>&1 | grep -E "^\[  (FAILED|PASSED|  SKIPPED) |Failure|top1|rel_err" | head -10
echo "tests $((SECONDS-start)) s"
ALT=AB_BIN=build-alt/fuselm
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
T16="--device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2"
timeout 100 bash scripts/gpu-ab.sh llama-3.1-8b 3 rules s40:$ALT -- $LAT 2>&1 | grep -v "^=="
timeout 60 bash scripts/gpu-ab.sh llama-3.1-8b 2 rules16 s4016:$ALT -- $T16 2>&1 | grep -E "16-[12] "
timeout 60 bash scripts/gpu-ab.sh llama-3.2-1b 3 rules s40:$ALT -- $LAT 2>&1 | grep -v "^=="
timeout 60 bash scripts/gpu-ab.sh llama-3.2-1b 2 rules16 s4016:$ALT -- $T16 2>&1 | grep -E "16-[12] "
tar czf $OUT/ab.tar.gz bench/results/dev/ab/*.json 2>/dev/null
echo "total $((SECONDS-start)) s"
