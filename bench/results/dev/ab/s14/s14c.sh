#!/usr/bin/env bash
# Session 14 (c): prefill's gate/up projection with SwiGLU in its output pass (gemm_swiglu, TMA +
# wgmma): its tests and lab against cuBLASLt + swiglu; the engine's goldens and fused tests; prefill
# A/B in turns (FUSELM_LAB_PREFILL_SWIGLU=0 runs cuBLASLt + swiglu); the tool's new copy kernel
# (non-persistent 8 KiB chunks) in its test; the copy probe's one- and two-load chunk copies.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
(nvcc -O3 -arch=sm_90a -std=c++17 -o /tmp/copy_probe bench/lab/copy_probe.cu > /tmp/probe-build.log 2>&1) &
tests="gpu_gemm_swiglu_test gpu_bench_copy_bandwidth_test gpu_golden_gpu_test gpu_fused_engine_test gpu_cuda_engine_test"
cmake --build build-gpu -j 16 --target fuselm $tests > /tmp/b.log 2>&1 || { grep -E "error" /tmp/b.log | head -20; tail -5 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
for t in $tests; do
  timeout 200 build-gpu/tests/$t > /tmp/$t.log 2>&1; rc=$?
  echo "$t rc=$rc $(grep -E '^\[  (PASSED|FAILED)  \]|SKIPPED \]' /tmp/$t.log | tr '\n' ' ') $((SECONDS-start)) s"
  grep -E '^\[  FAILED  \]|Failure|error|\[copy\]' /tmp/$t.log | head -12 | cut -c1-300
done
timeout 120 build-gpu/tests/gpu_gemm_swiglu_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[lab\]"
echo "lab $((SECONDS-start)) s"
for r in 1 2; do
  for arm in fused unfused; do
    v=""; [ $arm = unfused ] && v="FUSELM_LAB_PREFILL_SWIGLU=0"
    for s in llama-3.1-8b llama-3.2-1b; do
      env $v timeout 120 build-gpu/fuselm bench -m "synthetic:$s?vocab=32000" --device cuda --dtype bf16 -q --no-peak --scenario prefill \
        --prefill-lens 512,2048,8192 --json /tmp/p-$s-$arm-$r.json > /tmp/l.txt 2>&1 || tail -3 /tmp/l.txt
      python3 -c "
import json,sys; s=json.load(open(sys.argv[1]))['scenarios']; print(sys.argv[2], ' '.join('p%d %.0f tok/s %.0f TF' % (t['tokens'], t['tok_s'], t['tflops']) for t in s['prefill']))" /tmp/p-$s-$arm-$r.json "$s $arm r$r"
    done
  done
done
echo "prefill a/b $((SECONDS-start)) s"
wait
timeout 60 /tmp/copy_probe chunks small; echo "chunks rc=$? $((SECONDS-start)) s"
mkdir -p $OUT/s14c && cp /tmp/p-*.json $OUT/s14c/ 2>/dev/null; (cd $OUT && tar czf s14c.tgz s14c && rm -rf s14c)
