#!/usr/bin/env bash
# Prepared in session 26 for the next session's first device call: decode attention's first item
# per CTA staged by the host (first-items.patch).
# Why: in every timeline (s26b-e) decode attention's last CTA passes griddepcontrol.wait 2.4-3.3 us
# after the QKV projection ends, held by its own pre-wait chain, not by the QKV projection: from
# its start, 1.6 us to locate its first item (the lengths, a window's prefix sums), 1.2-1.5 us to
# stage its block numbers (a dependent read of the block table), 1.0-1.7 us to issue the K/V
# prologue. With a record per CTA (decode_items.h: the item's sequence, length and first item, and
# up to 12 block numbers, 64 bytes, written by the host into the staged step inputs that the graph
# copies), the record's line and the window's lengths go out together and the block numbers come
# from the same line. Predicted: 1B batch 1 +1.5-3% (~1.5 us of the last CTA's release a layer),
# 8B batch 1 +0.5-1.5%; batch 16 even (the stacked kernel reads no records).
# What is known: CPU tests pass (decode_items: the records match the numbering and the tables).
# An earlier form of the patch ran once on the GPU (s26f): its decode attention tests hit that
# call's 60 s timeout before their summary, and 1B batch 1 read 1,328.1-1,328.6 tok/s with no base
# arm (s26e's base: 1,321.5-1,324.6 on another machine). That form took the head-dim-64 split
# kernel to 198 registers (two CTAs an SM); this one keeps 168 (ptxas: 8 bytes of spill stores at
# 3-4 stages), with the first item's seek back in the loop's condition.
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s27/s27a.sh
set -uo pipefail
start=$SECONDS
export FUSELM_COMMIT=$(cat .commit 2>/dev/null || echo unknown)
D=bench/results/dev/ab/s27
bash scripts/gpu-build.sh fuselm || exit 1
cp build-gpu/fuselm /tmp/fuselm-base
patch -p1 < $D/first-items.patch > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm gpu_attention_test gpu_fused_engine_test gpu_fused_decode_test gpu_decode_timeline_test ||
    exit 1
for t in attention fused_engine fused_decode; do
  echo "== $t"
  timeout 200 build-gpu/tests/gpu_${t}_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
done
echo "build and tests $((SECONDS-start)) s"
bash scripts/gpu-timeline.sh $OUT/s27a-timeline.txt | grep attention
rm -f bench/results/dev/ab/*.json
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
timeout 150 bash scripts/gpu-ab.sh llama-3.2-1b 3 base:AB_BIN=/tmp/fuselm-base b -- $LAT 2>&1 | grep -v "^=="
timeout 120 bash scripts/gpu-ab.sh llama-3.1-8b 2 base:AB_BIN=/tmp/fuselm-base b -- $LAT 2>&1 | grep -v "^==" | grep -v 1b-
timeout 120 bash scripts/gpu-ab.sh llama-3.2-1b 2 base4:AB_BIN=/tmp/fuselm-base b4 -- --device cuda --dtype bf16 \
    --scenario throughput --batches 4 --reps 2 2>&1 | grep -v "^==" | grep 4-
echo "A/B $((SECONDS-start)) s"
mkdir -p $OUT/s27a && cp bench/results/dev/ab/*.json $OUT/s27a/ 2>/dev/null
(cd $OUT && tar czf s27a.tgz s27a && rm -rf s27a)
echo "total $((SECONDS-start)) s"
