#!/usr/bin/env bash
# s27b: decode attention's next-item claim moved from the item's start to after q's copies
# (s27b.patch). The SASS of the split kernel (bf16, head_dim 64, 3 stages) shows that ptxas
# aggregates the claim's atomicAdd over the warp (one address) and hands out its answer with a
# shuffle right after the atomic: warp 0 waits for the atomic's round trip before it loads its share
# of the block numbers, so the barrier after them (the timeline's m4) waits too. After q's copies the
# round trip overlaps the wait for q and the K/V prologue. A probe (bench/lab/latency_under_stream.cu)
# put one dependent read under a 4.1 TB/s stream at ~0.19 us (L2) / ~0.49 us (DRAM), so each link of
# attention's 1.3-1.6 us chain before its wait holds more than one round trip: this is one of them.
# Predicted: 1B batch 1 +0.5-1.5% (0.2-0.5 us a layer), 8B batch 1 +0.2-0.6%, 8B batch 16 even to +0.5%.
# Usage (GPU machine, carry .deps .commit .gpu-models .lab): OUT=$OUT bash bench/results/dev/ab/s27/s27b.sh
set -uo pipefail
start=$SECONDS
export FUSELM_COMMIT=$(cat .commit 2>/dev/null || echo unknown)
P=bench/results/dev/ab/s27/s27b.patch
# The claim in the SASS of the locally built cubins (before, after).
for f in old new; do
  echo "== claim, $f"
  cuobjdump -sass -fun '_ZN6fuselm16attention_detail52_GLOBAL__N__659b1393_19_attention_decode_cu_718a1dd519decode_split_kernelI13__nv_bfloat16Li64ELi3EEEvPKtS5_S5_NS_13PagedKvLayoutEPKiiS8_iiiiiNS_15DecodeSplitRuleEfNS0_21DecodeWorkspaceLayoutEPhPtPNS_11KernelTraceE' \
      .lab/attention_decode.$f.cubin 2>&1 | grep -E "ATOMG.E.ADD|SHFL.IDX|LDGSTS|BAR.SYNC|ACQBULK|CCTL|LDG" | grep -n "" |
      grep -B2 -A3 "ATOMG.E.ADD" | cut -c1-110
done
bash scripts/gpu-build.sh fuselm || exit 1
cp build-gpu/fuselm /tmp/fuselm-base
patch -p1 < $P > /dev/null || exit 1
bash scripts/gpu-build.sh fuselm gpu_attention_test gpu_fused_engine_test gpu_fused_decode_test gpu_decode_timeline_test ||
    exit 1
for t in attention fused_engine fused_decode; do
  echo "== $t"
  timeout 200 build-gpu/tests/gpu_${t}_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
done
echo "build and tests $((SECONDS-start)) s"
bash scripts/gpu-timeline.sh $OUT/s27b-timeline.txt | grep attention
rm -f bench/results/dev/ab/*.json
LAT="--device cuda --dtype bf16 --scenario latency --reps 2"
timeout 150 bash scripts/gpu-ab.sh llama-3.2-1b 3 base:AB_BIN=/tmp/fuselm-base claim -- $LAT 2>&1 | grep -v "^=="
timeout 120 bash scripts/gpu-ab.sh llama-3.1-8b 2 base:AB_BIN=/tmp/fuselm-base claim -- $LAT 2>&1 | grep -v "^==" | grep -v 1b-
timeout 150 bash scripts/gpu-ab.sh llama-3.1-8b 2 base16:AB_BIN=/tmp/fuselm-base claim16 -- --device cuda --dtype bf16 \
    --scenario throughput --batches 16 --reps 2 2>&1 | grep -v "^==" | grep 16-
echo "A/B $((SECONDS-start)) s"
mkdir -p $OUT/s27b && cp bench/results/dev/ab/*.json $OUT/s27b/ 2>/dev/null
(cd $OUT && tar czf s27b.tgz s27b && rm -rf s27b)
echo "total $((SECONDS-start)) s"
