#!/usr/bin/env bash
# Session 19 (a), prepared in session 18 and not yet run: the decode timeline's per-SM record (which
# SMs' CTAs end a grid). The 8B gate/up on rt2_w8_k4_cta is 448 CTAs in clusters of 4 with room for
# four an SM: four on 52 SMs and three on 80 if the scheduler spreads them evenly, and its first CTA
# ends ~14 us before its last (d7e94dc: 45.6 against 59.2 us). Prediction: the SMs with four CTAs
# end last (~59 us), the SMs with three ~46-50; if so, per-SM balance (not the K loop) is the
# gate/up's tail, and a grid whose work follows the SM (or claims row groups as it goes) is next.
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFUSELM_MODELS_DIR=$PWD/.gpu-models > /tmp/c.log 2>&1 || tail -20 /tmp/c.log
cmake --build build-gpu -j 16 --target gpu_decode_timeline_test > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "build $((SECONDS-start)) s"
timeout 100 build-gpu/tests/gpu_decode_timeline_test --gtest_filter='DecodeTimeline.Every*' 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" | head
timeout 120 build-gpu/tests/gpu_decode_timeline_test --gtest_also_run_disabled_tests --gtest_filter='*Lab*' 2>&1 | grep "^\[bench\]" | tee $OUT/timeline.txt
echo "total $((SECONDS-start)) s"
