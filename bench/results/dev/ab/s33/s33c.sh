#!/usr/bin/env bash
# Session 33, third call: the warp pipeline's activation stages sized by the launch's tokens
# (x-by-m.patch). A warp stage holds 2 KB of weights and the activation rows of the tile's 8 (or 16)
# tokens, 1,152 bytes, of which one token uses 144: at one token an 8-warp CTA takes 70 KB at four
# stages instead of 102, 140 KB instead of 204 on the deep ring, 52.6 KB instead of 77 at three.
# The first call found most late CTAs of the 1B batch-1 step starting only once their
# predecessor's CTAs left the SM, and three stages on the QKV projection (room for one attention
# CTA) gave +1.5%. With X sized by m: the 1B down projection's deep CTA (one an SM) leaves room for
# one QKV CTA beside it; the 1B O projection's CTAs leave room for more gate/up CTAs. Same bits
# (only where the rows sit in shared memory changes). Arms: xbym (with the tree's three-stage QKV
# rule: 52.6 KB, so up to four QKV CTAs an SM), xbym-qkv4 (the rule off: 70 KB, up to three).
# Predicted 1B +0.5-2% (risk: QKV CTAs stacking where more of them fit); 8B: its one-token O and
# down (256 CTAs, 102 -> 70 KB: three fit an SM) may stack too, so even to -1%.
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s33/s33c.sh
set -uo pipefail
# The tree's own three-stage test first (written in session 33 after its A/B; not yet run on a GPU).
bash scripts/gpu-build.sh gpu_skinny_gemm_test > /dev/null 2>&1 || echo "skinny GEMM test: build failed"
echo "== base skinny_gemm (three stages, deep ring)"
timeout 60 build-gpu/tests/gpu_skinny_gemm_test --gtest_filter='*ThreeStage*:*DeepWarp*' 2>&1 |
    grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -8
AB_TESTS="skinny_gemm fused_engine" OUT=$OUT timeout 500 \
    bash scripts/gpu-ab-patch.sh xbym=bench/results/dev/ab/s33/x-by-m.patch \
    xbym-qkv4=bench/results/dev/ab/s33/x-by-m-qkv4.patch -- llama-3.2-1b:3 llama-3.1-8b:1 2>&1 | grep -v "^== llama"
