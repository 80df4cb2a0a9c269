#!/usr/bin/env bash
# Session 14 (a): decode attention issuing the next item's loads while the current item merges
# (DecodeVariant::issue_ahead; lab switch FUSELM_LAB_DECODE_AHEAD=0 turns it off) — GPU tests, A/B in
# turns on both shapes (batch 1, 16, 64), the timeline's attention rows; then the copy probe's
# store-side and amortized modes.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
(nvcc -O3 -arch=sm_90a -std=c++17 -o /tmp/copy_probe bench/lab/copy_probe.cu > /tmp/probe-build.log 2>&1) &
cmake --build build-gpu -j 16 --target fuselm gpu_attention_test gpu_fused_decode_test gpu_decode_timeline_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
for t in gpu_attention_test gpu_fused_decode_test; do
  timeout 150 build-gpu/tests/$t > $OUT/$t.log 2>&1; rc=$?
  echo "$t rc=$rc $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/$t.log | tr '\n' ' ') $((SECONDS-start)) s"
  grep -E '^\[  FAILED  \]' $OUT/$t.log | head -8
done
for r in 1 2; do
  for arm in ahead after; do
    v=""; [ $arm = after ] && v="FUSELM_LAB_DECODE_AHEAD=0"
    for s in llama-3.1-8b llama-3.2-1b; do
      env $v timeout 90 build-gpu/fuselm bench -m "synthetic:$s?vocab=32000" --device cuda --dtype bf16 -q --no-peak --scenario latency,throughput \
        --batches 16,64 --reps 2 --json $OUT/a-$s-$arm-$r.json > /tmp/l.txt 2>&1 || tail -3 /tmp/l.txt
      python3 -c "
import json,sys; s=json.load(open(sys.argv[1]))['scenarios']; print(sys.argv[2], 'b1 %.1f' % s['latency']['decode_tok_s'], ' '.join('b%d %.0f' % (t['batch'], t['output_tok_s']) for t in s['throughput']))" $OUT/a-$s-$arm-$r.json "$s $arm r$r"
    done
  done
  echo "ab round $r done $((SECONDS-start)) s"
done
for arm in ahead after; do
  v=""; [ $arm = after ] && v="FUSELM_LAB_DECODE_AHEAD=0"
  echo "== timeline $arm"
  env $v timeout 100 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' > $OUT/timeline-$arm.txt 2>&1
  grep "^\[bench\]" $OUT/timeline-$arm.txt | grep -E "attention|kernel"
done
echo "before probe $((SECONDS-start)) s"
wait
tail -3 /tmp/probe-build.log
timeout 60 /tmp/copy_probe writes > $OUT/probe-writes.txt 2>&1; echo "writes rc=$?"; cat $OUT/probe-writes.txt
timeout 60 /tmp/copy_probe amortized > $OUT/probe-amortized.txt 2>&1; echo "amortized rc=$?"; cat $OUT/probe-amortized.txt
echo "total $((SECONDS-start)) s"
