#!/usr/bin/env bash
# s26e: s26d with the one-token instances as at 633a38a (s26e.patch, against 633a38a): s26d lost 1%
# on the 1B step at batch 1 (its one-token QKV tail 1.18 us instead of 0.94) and won 0.9% at 8B
# batch 16. Now the warp pipeline reads every epilogue operand after the wait as before, the
# one-token QKV epilogue looks up blocks and calls sincosf in its tail as before, the residual
# epilogue's gains go before the wait at 9-16 tokens only; the rotation's roundings are spelled out
# (fmaf/fmul) so that the one-token and 9-16-token instances give the same bits.
# Predicted: 1B batch 1 even, 8B batch 1 even, 8B batch 16 +0.6-0.9%.
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s26/s26e.sh
set -uo pipefail
start=$SECONDS
export FUSELM_COMMIT=$(cat .commit 2>/dev/null || echo unknown)
P=bench/results/dev/ab/s26/s26e.patch
patch -R -p1 < $P > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm || exit 1
cp build-gpu/fuselm /tmp/fuselm-base
patch -p1 < $P > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm gpu_skinny_gemm_test gpu_fused_engine_test gpu_fused_decode_test || exit 1
for t in skinny_gemm fused_engine fused_decode; do
  echo "== $t"
  timeout 120 build-gpu/tests/gpu_${t}_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
done
echo "build and tests $((SECONDS-start)) s"
rm -f bench/results/dev/ab/*.json
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
timeout 100 bash scripts/gpu-ab.sh llama-3.2-1b 3 base:AB_BIN=/tmp/fuselm-base e -- $LAT 2>&1 | grep -v "^=="
timeout 100 bash scripts/gpu-ab.sh llama-3.1-8b 2 base16:AB_BIN=/tmp/fuselm-base e16 -- --device cuda --dtype bf16 \
    --scenario throughput --batches 16 --reps 2 2>&1 | grep -v "^==" | grep 16-
timeout 60 bash scripts/gpu-ab.sh llama-3.1-8b 1 base:AB_BIN=/tmp/fuselm-base e -- $LAT 2>&1 | grep -v "^==" | grep -v 16-
echo "A/B $((SECONDS-start)) s"
mkdir -p $OUT/s26e && cp bench/results/dev/ab/*.json $OUT/s26e/ 2>/dev/null
(cd $OUT && tar czf s26e.tgz s26e && rm -rf s26e)
echo "total $((SECONDS-start)) s"
