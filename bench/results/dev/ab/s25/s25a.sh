#!/usr/bin/env bash
# Prepared in session 24 for the next session's first device call (failed machine starts spent
# that session's device time): the two experiments it prepared, each against the tree as it is.
# - s24e (bench/results/dev/ab/s24/s24e.sh, .patch): the 1B QKV and O projections let their
#   successors launch before their wait. Predicted 1B batch 1 -3 to +3%.
# - s24g (bench/results/dev/ab/s24/s24f.sh, s24g.patch): 16-token epilogues load every cluster
#   rank's partial sums before adding them in rank order (same bits). Predicted 8B batch-16 decode
#   steps +0.5-1.5%, batch 1 unchanged (its instances compile to the same code).
# Usage (on the GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s25-prep/s25a.sh
set -uo pipefail
start=$SECONDS
export FUSELM_COMMIT=$(cat .commit 2>/dev/null || echo unknown)
P=bench/results/dev/ab/s24
bash scripts/gpu-build.sh fuselm || exit 1
cp build-gpu/fuselm /tmp/fuselm-base
patch -p1 < $P/s24e.patch > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm || exit 1
cp build-gpu/fuselm /tmp/fuselm-early
patch -R -p1 < $P/s24e.patch > /dev/null || exit 1
patch -p1 < $P/s24g.patch > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm gpu_skinny_gemm_test gpu_fused_engine_test || exit 1
for t in skinny_gemm fused_engine; do
  echo "== $t"
  timeout 200 build-gpu/tests/gpu_${t}_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
done
echo "builds and tests $((SECONDS-start)) s"
rm -f bench/results/dev/ab/*.json
timeout 150 bash scripts/gpu-ab.sh llama-3.2-1b 3 base:AB_BIN=/tmp/fuselm-base early:AB_BIN=/tmp/fuselm-early -- \
    --device cuda --dtype bf16 --scenario latency --reps 2 2>&1 | grep -v "^=="
timeout 150 bash scripts/gpu-ab.sh llama-3.1-8b 2 base16:AB_BIN=/tmp/fuselm-base epi16 -- --device cuda --dtype bf16 \
    --scenario throughput --batches 16 --reps 2 2>&1 | grep -v "^=="
mkdir -p $OUT/s25a && cp bench/results/dev/ab/*.json $OUT/s25a/ 2>/dev/null
(cd $OUT && tar czf s25a.tgz s25a && rm -rf s25a)
echo "total $((SECONDS-start)) s"
