#!/usr/bin/env bash
# Prepared in session 25 for the next session's first device call: the 8B O and down projections in
# a rounding class that cuts K in seven (k7.patch: the variants rt1_w4_k7_cta and its one-token
# twin rt1_w7, the warp pipeline with 7 warps; the rules unchanged, so the A/B is by plan edits).
# Why: at batch 16 the k8 class's 512 CTAs (clusters of 8) run five on ~69 SMs, four or fewer on
# the rest, because clusters of 8 capped at four an SM do not all fit at once; in the edc2fd5
# timeline the down projection's SMs with five CTAs end at 35.2 us, those with four at 32.0, three
# at 31.6, so DRAM idles in the tail. Clusters of 7 make 448 CTAs, which a cap of four should fit in
# one wave (balance_sms is already on for both ops at 2+ tokens). Each CTA then streams 14% more.
# Prediction: 8B batch-16 decode steps +1.5-3% with both ops (down ~-2 us a layer, o ~-0.5);
# batch 1 -0.5 to +0.5% (7-warp CTAs instead of 8: 12% fewer bytes in flight at one token).
# The skinny GEMM tests cover the new variants (reference, batch independence, rounding class k7:
# rt1_w7 against rt1_w4_k7_cta bitwise); they have not run on a GPU yet.
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s26/s26a.sh
set -uo pipefail
start=$SECONDS
export FUSELM_COMMIT=$(cat .commit 2>/dev/null || echo unknown)
patch -p1 < bench/results/dev/ab/s26/k7.patch > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm gpu_skinny_gemm_test gpu_plan_kernels_test || exit 1
for t in skinny_gemm plan_kernels; do
  echo "== $t"
  timeout 200 build-gpu/tests/gpu_${t}_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
done
echo "build and tests $((SECONDS-start)) s"
rm -f bench/results/dev/ab/*.json
O="plan:decode.gemm.o.variant=rt1_w4_k7_cta,plan:decode.gemm.o.single_token_variant=rt1_w7"
D="plan:decode.gemm.down.variant=rt1_w4_k7_cta,plan:decode.gemm.down.single_token_variant=rt1_w7"
timeout 240 bash scripts/gpu-ab.sh llama-3.1-8b 3 rules16 k7o16:$O k7d16:$D k7od16:$O,$D -- --device cuda \
    --dtype bf16 --scenario throughput --batches 16 --reps 2 2>&1 | grep -v "^=="
timeout 200 bash scripts/gpu-ab.sh llama-3.1-8b 2 rules k7od:$O,$D -- --device cuda --dtype bf16 \
    --scenario latency --reps 2 2>&1 | grep -v "^==" | grep -v 16-
echo "A/B $((SECONDS-start)) s"
mkdir -p $OUT/s26a && cp bench/results/dev/ab/*.json $OUT/s26a/ 2>/dev/null
(cd $OUT && tar czf s26a.tgz s26a && rm -rf s26a)
echo "total $((SECONDS-start)) s"
