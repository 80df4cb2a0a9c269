#!/usr/bin/env bash
# Session 14: the committed full results (every scenario, both synthetic shapes), as bench/results/README.md lists them.
set -uo pipefail
start=$SECONDS
export FUSELM_COMMIT=$(cat .commit)
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target fuselm > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
for s in llama-3.1-8b llama-3.2-1b; do
  build-gpu/fuselm bench -m "synthetic:$s?vocab=32000" --scenario all --time-budget 300 -q --json $OUT/h200-$s.json --markdown $OUT/h200-$s.md 2>&1 | tail -4
  echo "$s done $((SECONDS-start)) s"
done
