#!/usr/bin/env bash
# A/B comparison of configurations of one build: runs `fuselm bench` once per configuration in
# turns (round 1: A, B, C, ...; round 2: A, B, C, ...), so that drift of the machine hits every
# configuration alike, then prints each run's decode tok/s (latency scenario, every depth) and
# output tok/s per batch (throughput scenario).
# A configuration is NAME or NAME:VAR=VALUE[,VAR=VALUE...], environment variables the run gets
# (commas separate variables, so a value cannot hold one: use another separator inside values).
# Usage: bash scripts/gpu-ab.sh SHAPE ROUNDS CONFIG... -- BENCH-ARGS...
#   e.g. bash scripts/gpu-ab.sh llama-3.2-1b 2 base other:SOME_SWITCH=1 -- --scenario latency --reps 2
# JSON goes to bench/results/dev/ab/SHAPE-NAME-ROUND.json.
set -uo pipefail
cd "$(dirname "$0")/.."
shape=$1 rounds=$2
shift 2
configs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do configs+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
out=bench/results/dev/ab
mkdir -p "$out"
for round in $(seq 1 "$rounds"); do
  for config in "${configs[@]}"; do
    name=${config%%:*} vars=()
    [ "$config" != "$name" ] && IFS=, read -r -a vars <<<"${config#*:}"
    json="$out/$shape-$name-$round.json"
    echo "== $shape $name round $round ${vars[*]:-}"
    env "${vars[@]}" build-gpu/fuselm bench -m "synthetic:$shape?vocab=32000" -q --no-peak --json "$json" "$@" \
        >"$out/$shape-$name-$round.log" 2>&1 || { echo "failed:"; tail -5 "$out/$shape-$name-$round.log"; }
  done
done
python3 - "$out" "$shape" <<'PY'
import glob, json, os, sys
out, shape = sys.argv[1], sys.argv[2]
print(f"{'run':<36} {'latency tok/s':>14}  depth tok/s; throughput batch:output tok/s")
for path in sorted(glob.glob(os.path.join(out, f"{shape}-*.json"))):
    try:
        s = json.load(open(path))["scenarios"]
    except Exception as e:
        print(f"{os.path.basename(path):<36} unreadable: {e}")
        continue
    lat = s.get("latency", {}).get("decode_tok_s")
    depth = " ".join(f"{d['depth']}:{d['decode_tok_s']:.1f}" for d in s.get("depth", []))
    batches = " ".join(f"{t['batch']}:{t['output_tok_s']:.0f}" for t in s.get("throughput", []))
    print(f"{os.path.basename(path)[:-5]:<36} {lat if lat is None else round(lat, 1)!s:>14}  {depth}"
          f"{'; ' + batches if batches else ''}")
PY
