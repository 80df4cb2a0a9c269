#!/usr/bin/env bash
# Session 37, first call: the wide CTA pipeline (`_wide`: 12-16 row tiles a CTA in ~32 KB stages,
# four deep, one CTA an SM) for the 8B projections at 16 tokens. Ran at bf07adb, which had the
# variant; the tree no longer does: apply wide-cta.patch (next to this script) first to rerun it.
# 1. its correctness: every skinny GEMM test (each iterates every variant: the reference, batch
#    independence, its rounding class bit for bit, tile groups, the PDL/graph chain), and the plan's
#    variant list against the kernels';
# 2. the isolated lab (SkinnyGemmTiming.Llama8BShapes: every variant at m = 1 and 16);
# 3. the read-pattern probe on the down projection's 117 MB: one CTA an SM in 32 KB stages against
#    four an SM in 8 KB stages, weights alone;
# 4. the step: 8B batch 16 with the O and down projections on rt4_w4_k8_wide, and with the QKV
#    projection on rt3_w4_k4_wide as well, against the rules (same rounding classes: same bits).
#    Predicted +1-1.5% decode-step tok/s (the activation copies of those three: 50 -> 12 MB a layer;
#    session 31's bound gave 2.6% for 70 MB).
# Usage (GPU machine, carry .deps .commit .gpu-models):  OUT=$OUT bash bench/results/dev/ab/s37/s37a.sh
set -uo pipefail
mkdir -p "$OUT"
bash scripts/gpu-build.sh fuselm gpu_skinny_gemm_test gpu_plan_kernels_test > "$OUT/build.txt" 2>&1 ||
  { tail -30 "$OUT/build.txt"; exit 1; }
cat "$OUT/build.txt"
timeout 240 build-gpu/tests/gpu_skinny_gemm_test --gtest_filter=-SkinnyGemmTiming.* > "$OUT/skinny-tests.txt" 2>&1
echo "skinny tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED|Failure" "$OUT/skinny-tests.txt" | head -20
timeout 60 build-gpu/tests/gpu_plan_kernels_test > "$OUT/plan-kernels.txt" 2>&1; echo "plan kernels rc=$?"
timeout 200 build-gpu/tests/gpu_skinny_gemm_test --gtest_filter=SkinnyGemmTiming.Llama8BShapes > "$OUT/lab-8b.txt" 2>&1
grep -E "_wide|rt1_w4_k8_cta|rt1_w4_k4_cta|best" "$OUT/lab-8b.txt" | grep -E "^(qkv|o|down) +16 |best" | head -40
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ibench/lab bench/lab/read_pattern_probe.cu -o /tmp/probe &&
  timeout 90 /tmp/probe 117440512 > "$OUT/probe-down.txt" 2>&1
grep -E "g128|g96|g512|peak" "$OUT/probe-down.txt" | head -24
bash scripts/gpu-ab.sh llama-3.1-8b 2 rules \
  wide_od:plan:decode.gemm.o.variant=rt4_w4_k8_wide,plan:decode.gemm.down.variant=rt4_w4_k8_wide \
  wide_all:plan:decode.gemm.o.variant=rt4_w4_k8_wide,plan:decode.gemm.down.variant=rt4_w4_k8_wide,plan:decode.gemm.qkv.variant=rt3_w4_k4_wide \
  -- --device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2 2>&1 | tail -12
cp bench/results/dev/ab/llama-3.1-8b-*.json "$OUT/" 2>/dev/null
