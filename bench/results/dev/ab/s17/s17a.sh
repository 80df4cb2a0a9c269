#!/usr/bin/env bash
# Session 17 (a): the CTA pipeline reads weights packed in tile groups (one 8 KB bulk copy per stage
# instead of 8 x 1 KB or 4 x 2 KB); the rules now pack gate/up and the LM head so (both their
# variants are CTA-pipeline variants). GPU tests, then A/B against the lab switch
# FUSELM_LAB_TILE_GROUPS=0 (the old layout, same bits), plus arm c: qkv/o/down on their CTA variant
# for one token too (so grouped as well) instead of the warp pipeline; timelines.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm gpu_skinny_gemm_test gpu_decode_timeline_test gpu_fused_engine_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
timeout 150 build-gpu/tests/gpu_skinny_gemm_test --gtest_filter='SkinnyGemm.*' 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure|rt1_w|tests ran" | head -30
timeout 150 build-gpu/tests/gpu_fused_engine_test --gtest_filter='*TileGroup*:*BatchInvariant*' 2>&1 | grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|differing" | head
echo "tests $((SECONDS-start)) s"
C8="plan:decode.gemm.qkv.single_token_variant=rt1_w4_k4_cta,plan:decode.gemm.o.single_token_variant=rt1_w4_k8_cta,plan:decode.gemm.down.single_token_variant=rt1_w4_k8_cta"
timeout 200 bash scripts/gpu-ab.sh llama-3.1-8b 3 rules old:FUSELM_LAB_TILE_GROUPS=0 c:$C8 -- --device cuda --dtype bf16 --scenario latency --reps 2 2>&1 | grep -v "^=="
echo "ab8 $((SECONDS-start)) s"
C1="plan:decode.gemm.qkv.single_token_variant=rt1_w4_k8_cta,plan:decode.gemm.o.single_token_variant=rt1_w4_k8_cta,plan:decode.gemm.down.single_token_variant=rt1_w4_k8_cta"
timeout 150 bash scripts/gpu-ab.sh llama-3.2-1b 3 rules old:FUSELM_LAB_TILE_GROUPS=0 c:$C1 -- --device cuda --dtype bf16 --scenario latency --reps 2 2>&1 | grep -v "^=="
echo "ab1 $((SECONDS-start)) s"
for s in llama-3.1-8b llama-3.2-1b; do
  timeout 120 bash scripts/gpu-ab.sh $s 2 rules16 old16:FUSELM_LAB_TILE_GROUPS=0 -- --device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2 2>&1 | grep -v "^==" | grep -E "16-[12] "
done
echo "ab16 $((SECONDS-start)) s"
for s in llama-3.1-8b llama-3.2-1b; do for arm in rules old; do
  sw=1; [ $arm = old ] && sw=0
  FUSELM_LAB_TILE_GROUPS=$sw FUSELM_TIMELINE_SHAPE=$s timeout 60 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" | grep -v "us after" | sed "s/^/$arm /" | tee -a $OUT/timeline.txt
done; done
tar czf $OUT/ab.tar.gz bench/results/dev/ab/*.json bench/results/dev/ab/*.log 2>/dev/null
echo "total $((SECONDS-start)) s"
