#!/usr/bin/env bash
# Configures build-gpu (Release, sm_90a only, for build speed; the models from .gpu-models when it
# is there) and builds the named targets (default: fuselm), printing the errors and failing when the
# build does. The preamble of a device lab script:
#   bash scripts/gpu-build.sh fuselm gpu_skinny_ffn_test || exit 1
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
start=$SECONDS
models=()
[ -n "${FUSELM_MODELS_DIR:-}" ] && models=(-DFUSELM_MODELS_DIR="$FUSELM_MODELS_DIR")
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real "${models[@]}" \
    > /tmp/gpu-build-configure.log 2>&1 || { tail -20 /tmp/gpu-build-configure.log; exit 1; }
cmake --build build-gpu -j "$(nproc)" --target "${@:-fuselm}" > /tmp/gpu-build.log 2>&1 ||
    { grep -E "error" -A3 /tmp/gpu-build.log | head -40; exit 1; }
echo "build $((SECONDS - start)) s"
