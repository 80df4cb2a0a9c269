#!/usr/bin/env bash
# Session 23 (c): does the decode step wait for its code? s23a and s23b changed a few hundred bytes
# of the skinny GEMMs' code and moved the 1B step by -2.3% and -4% (s22c: +1.9%), more than what
# the changes did to the kernels' work. If the step's kernels fetch their code from L2 each layer,
# the warps' "no instruction" stalls are a large share of their stalls. Nsight Compute profiles one
# decode graph as a whole (--graph-profiling graph: the kernels overlap and evict each other's code
# as in service; --cache-control none), Warp State section. Prediction, if code fetch is what the
# last sessions' sizes moved: "no instruction" >= 10% of the warp cycles per issued instruction in
# the 1B decode graph; under 3% says it is not.
set -uo pipefail
start=$SECONDS
bash scripts/gpu-build.sh fuselm || exit 1
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
prompt=$(seq -s, 1000 1511)  # 512 prompt tokens
for preset in llama-3.2-1b llama-3.1-8b; do
  timeout 170 "$ncu" --graph-profiling graph --cache-control none --section WarpStateStats --section SchedulerStats \
      --csv --page details build-gpu/fuselm generate -m "synthetic:$preset?vocab=32000" --device cuda \
      --prompt-ids "$prompt" -n 3 --temperature 0 --ignore-eos > $OUT/s23c-ncu-$preset.csv 2> $OUT/s23c-ncu-$preset.err
  echo "== $preset: ncu exit $? ($((SECONDS - start)) s)"
  python3 - $OUT/s23c-ncu-$preset.csv <<'PY'
import csv, sys
from collections import OrderedDict
lines = [l for l in open(sys.argv[1], newline="") if l.startswith('"')]
res = OrderedDict()
for r in csv.DictReader(lines):
    res.setdefault(r["ID"], (r.get("Kernel Name", "?"), []))[1].append((r["Metric Name"], r["Metric Unit"], r["Metric Value"]))
ids = list(res)
print(f"{len(ids)} results; the last three in full:")
for i in ids[-3:]:
    name, metrics = res[i]
    print(f"-- ID {i}: {name[:100]}")
    for n, u, v in metrics:
        print(f"   {n:<60} {u:<10} {v}")
PY
done
echo "total $((SECONDS-start)) s"
