#!/usr/bin/env bash
# Session 13 (c, lab): decode attention with 2 K/V stages in an instance capped at 168 registers
# (3 CTAs per SM at head_dim 128) against the default 3 stages (238 registers, 2 CTAs per SM).
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_decode_timeline_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
for r in 1 2; do
  for arm in base s2; do
    v=""; [ $arm = s2 ] && v="FUSELM_LAB_DECODE_STAGES=2"
    for s in llama-3.1-8b llama-3.2-1b; do
      env $v timeout 90 build-gpu/fuselm bench -m "synthetic:$s?vocab=32000" --device cuda --dtype bf16 -q --no-peak --scenario latency,throughput \
        --batches 16,64 --reps 2 --json /tmp/c-$s-$arm-$r.json > /tmp/l.txt 2>&1 || tail -3 /tmp/l.txt
      python3 -c "
import json,sys; s=json.load(open(sys.argv[1]))['scenarios']; print(sys.argv[2], 'b1 %.1f' % s['latency']['decode_tok_s'], ' '.join('b%d %.0f' % (t['batch'], t['output_tok_s']) for t in s['throughput']))" /tmp/c-$s-$arm-$r.json "$s $arm r$r"
    done
  done
done
for arm in base s2; do
  v=""; [ $arm = s2 ] && v="FUSELM_LAB_DECODE_STAGES=2"
  echo "== timeline $arm"
  env $v build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" | grep attention
done
echo "total $((SECONDS-start)) s"
