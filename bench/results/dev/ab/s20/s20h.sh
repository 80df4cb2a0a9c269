#!/usr/bin/env bash
# Session 20 (h): continuous batching with overlapped steps (the scheduler's lookahead) on the
# fused engine: the fused engine tests (a new one runs BatchRunner against each request alone),
# then a short serving run of the 1B shape.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DBUILD_TESTING=ON > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_fused_engine_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
timeout 120 build-gpu/tests/gpu_fused_engine_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
timeout 60 build-gpu/fuselm bench -m "synthetic:llama-3.2-1b?vocab=32000" --device cuda --dtype bf16 --scenario serving \
    --num-prompts 64 --request-rate inf -q --no-peak --json $OUT/serving-1b.json 2>&1 | tail -14
echo "total $((SECONDS-start)) s"
