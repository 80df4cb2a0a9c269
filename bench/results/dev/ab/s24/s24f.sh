#!/usr/bin/env bash
# s24f: the session's headline measurements (scripts/gpu-headline.sh without the GPU tests, which
# ran in s24a and s24b on the same kernels), then s24g's A/B on the headline's build (one device
# call: failed machine starts left no room for two). s24e waits for the next session.
# s24g: the CTA pipeline's (and every) 16-token epilogue loads all cluster ranks' partial sums before
# adding them in rank order (s24g.patch, same bits; one-token instances unchanged). Why: at batch 16
# the 8B O and down projections (k8 clusters) spend 1.7-1.9 us from their epilogue's start to their
# end, 0.4 at one token, and each rank's distributed-shared-memory loads waited for the previous
# rank's adds. Prediction: 8B batch-16 decode steps +0.5-1.5%; batch 1 unchanged (same code).
# Usage (on the GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s24/s24f.sh
set -uo pipefail
start=$SECONDS
FUSELM_HEADLINE_TESTS=0 bash scripts/gpu-headline.sh
echo "headline $((SECONDS-start)) s"
cp build-gpu/fuselm /tmp/fuselm-base
patch -p1 < bench/results/dev/ab/s24/s24g.patch > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm gpu_skinny_gemm_test || exit 1
timeout 100 build-gpu/tests/gpu_skinny_gemm_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
rm -f bench/results/dev/ab/*.json
timeout 100 bash scripts/gpu-ab.sh llama-3.1-8b 2 base16:AB_BIN=/tmp/fuselm-base new16 -- --device cuda --dtype bf16 \
    --scenario throughput --batches 16 --reps 2 2>&1 | grep -v "^=="
mkdir -p $OUT/s24g && cp bench/results/dev/ab/*.json $OUT/s24g/ 2>/dev/null
(cd $OUT && tar czf s24g.tgz s24g && rm -rf s24g)
echo "total $((SECONDS-start)) s"
