#!/usr/bin/env bash
# Session 18 (a), prepared in session 17 and not yet run: decode attention reading sequence 0's first
# block numbers at its start, beside the lengths (lab switch FUSELM_LAB_ATTN_EARLY_ROW=1), so that at
# batch 1 a CTA's first item stages its block numbers without a second round trip. The 8B timeline
# (d7e94dc) has the last attention CTA locate its item at 0.06 us after the QKV projection's end, its
# block numbers staged at 1.79 and its prologue issued at 3.70, then released at 3.75 (the first CTA
# at 1.06). Prediction: block numbers staged with the item located (~1.7 us earlier on the chain), the
# release and the layer ~1-1.5 us earlier at 8B batch 1 (+1%); nothing at 1B (its chain ends before
# the QKV projection does) or at batch 16.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_attention_test gpu_decode_timeline_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
timeout 200 build-gpu/tests/gpu_attention_test --gtest_filter='AttentionDecode.*' 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure|differ" | head -20
echo "tests $((SECONDS-start)) s"
timeout 120 bash scripts/gpu-ab.sh llama-3.1-8b 3 rules e:FUSELM_LAB_ATTN_EARLY_ROW=1 -- --device cuda --dtype bf16 --scenario latency --reps 2 2>&1 | grep -v "^=="
timeout 120 bash scripts/gpu-ab.sh llama-3.2-1b 3 rules e:FUSELM_LAB_ATTN_EARLY_ROW=1 -- --device cuda --dtype bf16 --scenario latency --reps 2 2>&1 | grep -v "^=="
for s in llama-3.1-8b llama-3.2-1b; do for sw in 0 1; do
  FUSELM_LAB_ATTN_EARLY_ROW=$sw FUSELM_TIMELINE_SHAPE=$s timeout 60 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" | grep -v "us after" | grep -E "shape|attention" | sed "s/^/early=$sw /" | tee -a $OUT/timeline.txt
done; done
tar czf $OUT/ab.tar.gz bench/results/dev/ab/*.json bench/results/dev/ab/*.log 2>/dev/null
echo "total $((SECONDS-start)) s"
