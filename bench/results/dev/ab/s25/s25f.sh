#!/usr/bin/env bash
# Session 25, fourth call: weight stages before the wait in the one-token warp pipeline, per kind
# of instance (s25f.patch, lab switches for the experiment only: FUSELM_LAB_WARP_EARLY_QKV,
# _DEEP (8-stage rings: the 1B down projection), _RES (O and the 8B down), _OTHER = 1 or 2 stages
# before the wait, then the prologue's activations, then its other weight stages).
# Why: s25b moved every warp-pipeline GEMM to one stage before the wait and lost 1-2%; but per
# kernel the 1B timeline differs: the QKV projection's first stage lands 3.2 us after its release
# (o 1.2, down 2.3), and the deep ring issues 112 KB an SM before the wait.
# Prediction: 1B batch 1 +0.5-2% with the QKV projection alone at 1-2 stages; the others even or
# slower. Also: whether this lab build passes the skinny GEMM reference test (s25b/s25d's did not).
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s25/s25f.sh
set -uo pipefail
start=$SECONDS
export FUSELM_COMMIT=$(cat .commit 2>/dev/null || echo unknown)
patch -p1 < bench/results/dev/ab/s25/s25f.patch > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm gpu_skinny_gemm_test || exit 1
T=build-gpu/tests/gpu_skinny_gemm_test
for e in FUSELM_LAB_NONE=1 FUSELM_LAB_WARP_EARLY_QKV=1 FUSELM_LAB_WARP_EARLY_OTHER=2; do
  echo "== StoreMatchesReference with $e: $(env $e timeout 60 $T --gtest_filter='*StoreMatchesReferenceForEveryVariantAndBatch' 2>&1 |
      grep -E '^\[  (FAILED|PASSED) ' | head -1)"
done
echo "build and tests $((SECONDS-start)) s"
rm -f bench/results/dev/ab/*.json
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
timeout 200 bash scripts/gpu-ab.sh llama-3.2-1b 3 base q1:FUSELM_LAB_WARP_EARLY_QKV=1 q2:FUSELM_LAB_WARP_EARLY_QKV=2 \
    d2:FUSELM_LAB_WARP_EARLY_DEEP=2 r2:FUSELM_LAB_WARP_EARLY_RES=2 q1d2:FUSELM_LAB_WARP_EARLY_QKV=1,FUSELM_LAB_WARP_EARLY_DEEP=2 \
    -- $LAT 2>&1 | grep -v "^=="
timeout 200 bash scripts/gpu-ab.sh llama-3.1-8b 2 base q1:FUSELM_LAB_WARP_EARLY_QKV=1 q2:FUSELM_LAB_WARP_EARLY_QKV=2 \
    r2:FUSELM_LAB_WARP_EARLY_RES=2 -- $LAT 2>&1 | grep -v "^=="
echo "A/B $((SECONDS-start)) s"
mkdir -p $OUT/s25f && cp bench/results/dev/ab/*.json $OUT/s25f/ 2>/dev/null
(cd $OUT && tar czf s25f.tgz s25f && rm -rf s25f)
echo "total $((SECONDS-start)) s"
