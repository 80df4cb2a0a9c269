#!/usr/bin/env bash
# Session 29, fourth call: the LM head's greedy pick (kept in the tree: `base`): its GPU tests, then
# the A/B against the same tree without the pick (`nopick`) and a bound with no ids written to the
# host (`nohost`, measurement only).
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s29/s29d.sh
set -uo pipefail
start=$SECONDS
bash scripts/gpu-build.sh fuselm gpu_skinny_gemm_test gpu_cuda_engine_test gpu_fused_engine_test gpu_sampling_test || exit 1
for t in skinny_gemm:'*' cuda_engine:'*Sampling*' fused_engine:'*' sampling:'*'; do
  echo "== ${t%%:*}"
  timeout 240 "build-gpu/tests/gpu_${t%%:*}_test" --gtest_filter="${t#*:}" 2>&1 |
      grep -E "^\[  (FAILED|PASSED) |Failure|^\[  FAILED" -A3 | head -20
done
echo "tests $((SECONDS - start)) s"
bash scripts/gpu-ab-patch.sh nopick=bench/results/dev/ab/s29/no-greedy-pick.patch \
    nohost=bench/results/dev/ab/s29/no-host-ids-bound.patch -- llama-3.2-1b:3 llama-3.1-8b:2
echo "total $((SECONDS - start)) s"
