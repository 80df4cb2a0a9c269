#!/usr/bin/env bash
# Session 25, last call: what bounds the 16-token GEMMs' K loops (8B batch 16 streams ~3.9-4.0 TB/s
# where the one-token warp pipeline streams ~4.5). Nsight Compute over the first five 9-16-token
# CTA-pipeline kernels of an 8B batch-16 `fuselm bench` run (prompt 128) (layer 0's qkv, o, gate/up, down,
# layer 1's qkv), each profiled alone (graph nodes serialised, so no PDL overlap): DRAM and L2
# throughput against peak, and the warps' stall reasons.
# Prediction: DRAM at 80-88% of peak during the kernels, L2 far from its limit; if the consumers'
# top stall is waiting on the full barrier and the producer's on the empty one, the bulk copies'
# request pattern (not the SMs) is the bound.
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s25/s25g.sh
set -uo pipefail
start=$SECONDS
bash scripts/gpu-build.sh fuselm || exit 1
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
timeout 200 "$ncu" --graph-profiling node --cache-control none --kernel-name-base demangled \
    -k 'regex:skinny_gemm_cta_kernel<__nv_bfloat16, .int.2,' --launch-count 4 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
    --csv --page raw build-gpu/fuselm bench -m 'synthetic:llama-3.1-8b?vocab=32000' --device cuda --dtype bf16 \
    --scenario throughput --batches 16 --reps 1 --no-peak -q > $OUT/s25g-ncu.csv 2> $OUT/s25g-ncu.err
echo "== ncu exit $? ($((SECONDS - start)) s)"
tail -3 $OUT/s25g-ncu.err
python3 - $OUT/s25g-ncu.csv <<'PY'
import csv, sys
lines = [l for l in open(sys.argv[1], newline="") if l.startswith('"')]
rows = list(csv.reader(lines))
if len(rows) < 3: sys.exit("no results")
head, units, data = rows[0], rows[1], rows[2:]
want = ["gpu__time_duration.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__bytes_read.sum.per_second", "lts__throughput.avg.pct_of_peak_sustained_elapsed",
        "lts__t_sector_hit_rate.pct", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "l1tex__throughput.avg.pct_of_peak_sustained_active", "launch__grid_size",
        "launch__occupancy_limit_shared_mem", "sm__warps_active.avg.pct_of_peak_sustained_active"]
for d in data:
    name = d[head.index("Kernel Name")]
    print("--", d[head.index("ID")], name[name.find("<"):][:70])
    for w in want:
        if w in head: print(f"   {w:<60} {units[head.index(w)]:<10} {d[head.index(w)]}")
    stalls = [(h, d[i]) for i, h in enumerate(head) if h.startswith("smsp__average_warp_latency_issue_stalled")
              or h.startswith("smsp__average_warps_issue_stalled")]
    def val(x):
        try: return float(x[1].replace(",", ""))
        except ValueError: return -1
    for h, v in sorted(stalls, key=val, reverse=True)[:6]:
        print(f"   {h:<90} {v}")
PY
gzip -f $OUT/s25g-ncu.csv
echo "total $((SECONDS-start)) s"
