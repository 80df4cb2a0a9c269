#!/usr/bin/env bash
# Session 14 (d): the headline (every GPU test, timeline, --compare, batch 16) and the fused
# gate/up + SwiGLU lab with the grouped CTA order.
set -uo pipefail
start=$SECONDS
bash scripts/gpu-headline.sh
build-gpu/tests/gpu_gemm_swiglu_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[lab\]"
grep -E "gemm_swiglu|copy_bandwidth" $OUT/ctest-gpu.log 2>/dev/null | head -5
tar czf $OUT/results.tgz bench/results/h200-*-compare.* bench/results/dev/decode-timeline/$(cat .commit).txt bench/results/dev/b16-*-$(cat .commit).json bench/results/gpu-check.json 2>/dev/null
echo "total $((SECONDS-start)) s"
