#!/usr/bin/env bash
# s24f: the session's headline (scripts/gpu-headline.sh) and then s24e's A/B on the headline's
# build (one device call: the budget left no room for two).
# Usage (on the GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s24/s24f.sh
set -uo pipefail
start=$SECONDS
bash scripts/gpu-headline.sh
echo "headline $((SECONDS-start)) s"
source scripts/gpu-env.sh
cp build-gpu/fuselm /tmp/fuselm-base
patch -p1 < bench/results/dev/ab/s24/s24e.patch > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm || exit 1
rm -f bench/results/dev/ab/*.json
timeout 120 bash scripts/gpu-ab.sh llama-3.2-1b 3 base:AB_BIN=/tmp/fuselm-base early -- --device cuda --dtype bf16 \
    --scenario latency --reps 2 2>&1 | grep -v "^=="
mkdir -p $OUT/s24e && cp bench/results/dev/ab/*.json $OUT/s24e/ 2>/dev/null
(cd $OUT && tar czf s24e.tgz s24e && rm -rf s24e)
echo "total $((SECONDS-start)) s"
