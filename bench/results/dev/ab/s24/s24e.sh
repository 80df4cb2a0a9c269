#!/usr/bin/env bash
# s24e: the warp pipeline lets the next kernel launch before its wait when at most one weight stage
# is left after the prologue (s24e.patch: `stages <= STAGES` instead of `STAGES - 1`). Of the rule
# plans' one-token GEMMs that changes the 1B QKV and O projections only (four stages a warp, four
# in the ring): attention's CTAs may then start during the QKV projection's wait, and the gate/up
# projection's during attention, prefetching their first stages while DRAM is otherwise idle (the
# 1B attention streams only the O projection's prologue for its ~6.5 us).
# Prediction: 1B batch 1 -3 to +3% (the early CTAs' traffic may queue attention's latency-bound
# loads, as the L2 warm-up of session 12 did); the 8B shape and batch 16 do not run the changed path.
# Usage (on the GPU machine, carry .deps .gpu-models): OUT=$OUT bash bench/results/dev/ab/s24/s24e.sh
set -uo pipefail
start=$SECONDS
bash scripts/gpu-build.sh fuselm || exit 1
cp build-gpu/fuselm /tmp/fuselm-base
patch -p1 < bench/results/dev/ab/s24/s24e.patch > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm || exit 1
rm -f bench/results/dev/ab/*.json
timeout 150 bash scripts/gpu-ab.sh llama-3.2-1b 3 base:AB_BIN=/tmp/fuselm-base early -- --device cuda --dtype bf16 \
    --scenario latency --reps 2 2>&1 | grep -v "^=="
mkdir -p $OUT/s24e && cp bench/results/dev/ab/*.json $OUT/s24e/ 2>/dev/null
(cd $OUT && tar czf s24e.tgz s24e && rm -rf s24e)
echo "total $((SECONDS-start)) s"
