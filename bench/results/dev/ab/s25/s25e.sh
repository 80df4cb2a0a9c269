#!/usr/bin/env bash
# Session 25, third call: the headline (every GPU test, the timeline, --compare on both shapes,
# batch 16) on the commit that issues two weight stages before the wait at 9-16 tokens (s25e.patch).
# s25b/s25d's lab builds failed SkinnyGemm.StoreMatchesReferenceForEveryVariantAndBatch with an
# illegal instruction under every lab switch; if the test fails here too, the same test on the
# commit before (the patch reversed) tells whether the machine or the change is the cause.
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s25/s25e.sh
set -uo pipefail
start=$SECONDS
export FUSELM_COMMIT=$(cat .commit 2>/dev/null || echo unknown)
FUSELM_HEADLINE_TESTS=1 bash scripts/gpu-headline.sh
if grep -qiE "skinny_gemm.*(failed|exception)" "$OUT/ctest-gpu.log" 2>/dev/null; then
  grep -E "FAILED|Failure" -A3 build-gpu/Testing/Temporary/LastTest.log 2>/dev/null | head -20
  patch -R -p1 < bench/results/dev/ab/s25/s25e.patch > /dev/null || exit 1
  bash scripts/gpu-build.sh gpu_skinny_gemm_test || exit 1
  echo "== the commit before: $(timeout 100 build-gpu/tests/gpu_skinny_gemm_test 2>&1 | grep -E '^\[  (FAILED|PASSED) ' | head -3)"
fi
echo "total $((SECONDS-start)) s"
