#!/usr/bin/env bash
# Session 23 (d): s23c again with every metric of the Warp State section printed (--page raw): the
# details page has no stall breakdown. Only the two decode graphs of the 1B run are profiled (results
# 346 and 347 in s23c: --launch-skip 346). First the GGUF golden test (CudaGolden.TinyLlama2GgufBf16). Prediction as in s23c: code fetch matters if "no
# instruction" is >= 10% of the warp cycles per issued instruction, not if under 3%.
set -uo pipefail
start=$SECONDS
bash scripts/gpu-build.sh fuselm gpu_golden_gpu_test || exit 1
# The GGUF golden, which the headline cannot run (its model does not fit the headline's carry).
timeout 120 build-gpu/tests/gpu_golden_gpu_test --gtest_filter='*Gguf*' 2>&1 | grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|top1|rel" -A3 | head -12
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
prompt=$(seq -s, 1000 1511)  # 512 prompt tokens
preset=llama-3.2-1b
timeout 200 "$ncu" --graph-profiling graph --cache-control none --section WarpStateStats --launch-skip 346 \
    --launch-count 2 --csv --page raw build-gpu/fuselm generate -m "synthetic:$preset?vocab=32000" --device cuda \
    --prompt-ids "$prompt" -n 3 --temperature 0 --ignore-eos > $OUT/s23d-ncu-$preset.csv 2> $OUT/s23d-ncu-$preset.err
echo "== $preset: ncu exit $? ($((SECONDS - start)) s)"
python3 - $OUT/s23d-ncu-$preset.csv <<'PY'
import csv, sys
lines = [l for l in open(sys.argv[1], newline="") if l.startswith('"')]
rows = list(csv.reader(lines))
head, units, data = rows[0], rows[1], rows[2:]
print(f"{len(data)} results")
for d in data:
    print("-- ID", d[head.index("ID")], d[head.index("Kernel Name")][:60])
    stalls = [(h, u, d[i]) for i, (h, u) in enumerate(zip(head, units)) if "stall" in h or "warp_latency" in h
              or "issue_active" in h or "cycles_active" in h]
    def val(x):
        try: return float(x[2].replace(",", ""))
        except ValueError: return -1
    for h, u, v in sorted(stalls, key=val, reverse=True)[:60]:
        print(f"   {h:<90} {u:<10} {v}")
PY
echo "total $((SECONDS-start)) s"
