#!/usr/bin/env bash
# Session 22 (a): the one-launch FFN's stream cap (~3.1-3.2 TB/s at one CTA an SM, any ring depth).
#  - SkinnyFfn.* (the review commit 1751c72, the new residency check, two CTAs an SM) and the fused
#    engine's one-launch test;
#  - SkinnyFfn.DISABLED_Lab: two CTAs an SM with 4-stage rings (twice the warps streaming, the same
#    bytes in flight an SM) and the odd CTAs' gate/up jobs reversed (address camping), then the
#    per-CTA stamps. Prediction: if the cap is the requests one SM's 8 warps keep in flight (per-warp
#    cp.async), two CTAs an SM lift it toward the two launches' rate; reversal moves nothing;
#  - plan-edit A/Bs on the 1B step: the o and qkv one-token GEMMs balanced over the SMs.
#    Prediction: within +-1% (session 19 measured every GEMM balanced at one token -0.7% on the 8B).
set -uo pipefail
start=$SECONDS
bash scripts/gpu-build.sh fuselm gpu_skinny_ffn_test gpu_fused_engine_test || exit 1
timeout 120 build-gpu/tests/gpu_skinny_ffn_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -20
timeout 120 build-gpu/tests/gpu_fused_engine_test --gtest_filter='*OneLaunch*' 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -10
echo "tests $((SECONDS-start)) s"
timeout 200 build-gpu/tests/gpu_skinny_ffn_test --gtest_also_run_disabled_tests --gtest_filter='*DISABLED_Lab' 2>&1 | grep -E "\[bench\]|Failure" -A2
echo "lab $((SECONDS-start)) s"
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
G=plan:decode.gemm
timeout 150 bash scripts/gpu-ab.sh llama-3.2-1b 2 rules obal:$G.o.single_token_balance_sms=true \
    qkvbal:$G.qkv.single_token_balance_sms=true -- $LAT 2>&1 | grep -v "^=="
mkdir -p $OUT/s22a && cp bench/results/dev/ab/*.json $OUT/s22a/ 2>/dev/null
(cd $OUT && tar czf s22a.tgz s22a && rm -rf s22a)
echo "total $((SECONDS-start)) s"
