#!/usr/bin/env bash
# Prepared in session 32 (its device time was spent): does the batch-1 attention launch's last
# cluster wait for room next to the QKV projection's CTAs? The timeline lab now records each SM's
# last CTA start (kernel_trace.h) and prints, per kind of kernel, its late SMs (last start within the
# launch's last microsecond of starts) and whether the late CTA started beside the predecessor's CTAs
# there or after the last of them had left, and how long after. The attention launch's 24 idle
# clusters (a wave for the longest sequence's items) would count among the late starts, so the
# timeline runs with ../s32/no-idle-clusters-bound.patch (one cluster per head group at batch 1:
# right at the lab's lengths, +0.07% in session 32). Then the same without the patch, for the
# record. If late attention CTAs start ~0-0.3 us after a QKV CTA's end on their SM, the room is what
# the last cluster waits for (fused_decode.md, "After session 32": a one-token QKV CTA takes 102 KB).
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s33-prep/s33a.sh
set -uo pipefail
mkdir -p "$OUT"
patch -p1 --forward < bench/results/dev/ab/s32/no-idle-clusters-bound.patch > /dev/null || exit 1
bash scripts/gpu-build.sh gpu_decode_timeline_test > /dev/null 2>&1 || { echo "build failed"; exit 1; }
timeout 200 bash scripts/gpu-timeline.sh "$OUT/tl-noidle.txt" > /dev/null
grep -E "late SMs|CTAs an SM" "$OUT/tl-noidle.txt" | grep " 1 " 
patch -R -p1 < bench/results/dev/ab/s32/no-idle-clusters-bound.patch > /dev/null || exit 1
bash scripts/gpu-build.sh gpu_decode_timeline_test > /dev/null 2>&1 || { echo "build failed"; exit 1; }
timeout 200 bash scripts/gpu-timeline.sh "$OUT/tl-rules.txt"
# The timeline's own tests (the record's new per-SM start checks among them; written in session 32).
timeout 120 build-gpu/tests/gpu_decode_timeline_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
grep -E "late SMs" "$OUT/tl-rules.txt"
