#!/usr/bin/env bash
# Session 37, third call: the plain bench at 4d19113 (decode attention's merges through one helper,
# register counts unchanged), as a check that the step's speed did not move: 1B batch 1 (latency
# scenario) twice, 8B batch 16 once.
# Usage (GPU machine, carry .deps .commit):  OUT=$OUT bash bench/results/dev/ab/s37/s37b.sh
set -uo pipefail
mkdir -p "$OUT"
bash scripts/gpu-build.sh fuselm > "$OUT/build.txt" 2>&1 || { tail -20 "$OUT/build.txt"; exit 1; }
cat "$OUT/build.txt"
for i in 1 2; do
  build-gpu/fuselm bench -m "synthetic:llama-3.2-1b?vocab=32000" --device cuda --dtype bf16 --scenario latency \
    --reps 2 -q --no-peak --json "$OUT/bench-1b-$i.json" 2>&1 | tail -2
done
build-gpu/fuselm bench -m "synthetic:llama-3.1-8b?vocab=32000" --device cuda --dtype bf16 --scenario throughput \
  --batches 16 --reps 2 -q --no-peak --json "$OUT/bench-8b-b16.json" 2>&1 | tail -2
python3 - "$OUT" <<'PY'
import json, sys, glob
for p in sorted(glob.glob(sys.argv[1] + "/bench-*.json")):
    s = json.load(open(p))["scenarios"]
    lat = s.get("latency", {}).get("decode_tok_s")
    thr = [(t["output_tok_s"], t["decode_tok_s"]) for t in s.get("throughput", [])]
    print(p.split("/")[-1], "decode tok/s" if lat else "b16 output/decode-step tok/s", lat or thr)
PY
