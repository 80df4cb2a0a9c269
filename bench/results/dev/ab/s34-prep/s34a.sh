#!/usr/bin/env bash
# Prepared in session 33: the 1B down projection's deep ring with its activation stages sized by the
# launch's tokens (x-by-m-deep.patch). Session 33 (../s33/) found the 1B batch-1 QKV projection's late
# CTAs starting only once the down projection's CTAs leave their SMs (83 of 91 late SMs, 0.38 us
# after), and the down projection's own late CTAs only once the gate/up CTAs leave (80 of 80). The
# down projection's one-token deep CTA (8 stages, one an SM: 128 CTAs) takes 204 KB, of which 63 KB
# are activation rows for 8 tokens where one is used; sized by m it takes 140 KB, which leaves room
# for one 77 KB QKV CTA beside it (its two prologue weight stages in flight before the wait), and
# lets it start beside one gate/up CTA (56 KB) instead of none. One deep CTA an SM whatever its size,
# so none of its own launch stack (what lost in s33c, where every one-token CTA took less). Same bits.
# No 8B launch takes the deep ring at these lengths (its one-token grids exceed one CTA an SM).
# Predicted 1B +0.5-1.5%, 8B even.
# Second arm, o3 (o3.patch): the tree's three-stage rule for grids of up to two CTAs an SM, not only
# of more than one: it then also takes the 1B O projection's 128 one-token CTAs (102 -> 77 KB), which
# the block scheduler stacks two an SM on 55 SMs (a90d1dc's timeline), where the gate/up
# projection's 56 KB CTAs (padded to four an SM) then fit only as they leave (67 late SMs, 0.55 us
# after). At 77 KB an SM with two O CTAs takes one gate/up CTA early, with one O CTA still two. The O
# projection issues two weight stages before its wait instead of three. No 8B launch takes it.
# Predicted 1B -0.5 to +0.8%. Third arm, deep-o3: both. The timeline of the winner is s34b.sh.
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s34-prep/s34a.sh
set -uo pipefail
mkdir -p "$OUT"
# The tree's two one-tile bit tests first (moved onto one helper after session 33's device time).
bash scripts/gpu-build.sh gpu_skinny_gemm_test > /dev/null 2>&1 || echo "skinny GEMM test: build failed"
echo "== base skinny_gemm (three stages, deep ring)"
timeout 60 build-gpu/tests/gpu_skinny_gemm_test --gtest_filter='*KeepsATokensBits*' 2>&1 |
    grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -8
AB_TESTS="skinny_gemm fused_engine" OUT=$OUT timeout 450 \
    bash scripts/gpu-ab-patch.sh deep=bench/results/dev/ab/s34-prep/x-by-m-deep.patch \
    o3=bench/results/dev/ab/s34-prep/o3.patch deep-o3=bench/results/dev/ab/s34-prep/deep-o3.patch \
    -- llama-3.2-1b:3 llama-3.1-8b:1 2>&1 | grep -v "^== llama"
