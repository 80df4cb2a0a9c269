#!/usr/bin/env bash
# A/B comparison of configurations of one build: runs `fuselm bench` once per configuration in
# turns (round 1: A, B, C, ...; round 2: A, B, C, ...), so that drift of the machine hits every
# configuration alike, then prints each run's decode tok/s (latency scenario, every depth) and
# output / decode-step tok/s per batch (throughput scenario).
# A configuration is NAME or NAME:SETTING[,SETTING...] (commas separate settings, so a value cannot
# hold one). A setting is an environment variable the run gets, VAR=VALUE, or an edit of the rule
# plan, plan:PATH=VALUE with PATH a dotted path into `fuselm plan --json` (e.g.
# plan:decode.gemm.gate_up.variant=rt1_w8_k2_cta): a configuration with edits runs with --plan on
# the edited rule plan (made once, for AB_PLAN_DTYPE, default bf16). Edits the plan derives other
# fields from (the split, the KV block size) are refused by the engine with the values it expects.
# The setting AB_BIN=PATH runs that fuselm binary instead of build-gpu/fuselm (e.g. a build of
# another commit, for changes no switch can select); arg:FLAG adds FLAG to that run's bench
# arguments (e.g. arg:--sync-decode).
# Usage: bash scripts/gpu-ab.sh SHAPE ROUNDS CONFIG... -- BENCH-ARGS...
#   e.g. bash scripts/gpu-ab.sh llama-3.2-1b 2 base other:SOME_SWITCH=1 -- --scenario latency --reps 2
#        bash scripts/gpu-ab.sh llama-3.1-8b 2 rules g8:plan:decode.gemm.gate_up.variant=rt1_w8_k2_cta \
#            -- --device cuda --dtype bf16 --scenario throughput --batches 16 --reps 2
# JSON goes to bench/results/dev/ab/SHAPE-NAME-ROUND.json (plan files to SHAPE-NAME.plan.json).
set -uo pipefail
cd "$(dirname "$0")/.."
shape=$1 rounds=$2
shift 2
configs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do configs+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
out=bench/results/dev/ab
mkdir -p "$out"
model="synthetic:$shape?vocab=32000"
rules="$out/$shape-rules.plan.json"
# The configuration's plan file, when it edits the plan: the rule plan with its edits applied.
plan_for() {  # NAME SETTING...
  local name=$1 edits=()
  shift
  for v in "$@"; do [[ $v == plan:* ]] && edits+=("${v#plan:}"); done
  [ ${#edits[@]} -eq 0 ] && return 0
  if [ ! -s "$rules" ]; then
    build-gpu/fuselm plan -m "$model" --dtype "${AB_PLAN_DTYPE:-bf16}" --json >"$rules" || { rm -f "$rules"; return 1; }
  fi
  python3 - "$rules" "$out/$shape-$name.plan.json" "${edits[@]}" <<'PY' || return 1
import json, sys
plan = json.load(open(sys.argv[1]))
for edit in sys.argv[3:]:
    path, _, value = edit.partition("=")
    *parents, leaf = path.split(".")
    node = plan
    for key in parents:
        if not isinstance(node, dict) or key not in node:
            sys.exit(f"gpu-ab.sh: the plan has no '{path}'")
        node = node[key]
    if not isinstance(node, dict) or leaf not in node:
        sys.exit(f"gpu-ab.sh: the plan has no '{path}'")
    node[leaf] = (int(value) if value.lstrip("-").isdigit() else
                  {"true": True, "false": False}.get(value, value))
json.dump(plan, open(sys.argv[2], "w"), indent=1)
PY
  echo "$out/$shape-$name.plan.json"
}
for round in $(seq 1 "$rounds"); do
  for config in "${configs[@]}"; do
    name=${config%%:*} settings=() vars=() plan_args=()
    [ "$config" != "$name" ] && IFS=, read -r -a settings <<<"${config#*:}"
    bin=build-gpu/fuselm
    for v in "${settings[@]}"; do
      if [[ $v == AB_BIN=* ]]; then bin=${v#AB_BIN=}; elif [[ $v == arg:* ]]; then plan_args+=("${v#arg:}");
      elif [[ $v != plan:* ]]; then vars+=("$v"); fi
    done
    plan=$(plan_for "$name" "${settings[@]}") || { echo "== $shape $name: no plan file, skipped"; continue; }
    [ -n "$plan" ] && plan_args+=(--plan "$plan")
    json="$out/$shape-$name-$round.json"
    echo "== $shape $name round $round ${settings[*]:-}"
    env "${vars[@]}" "$bin" bench -m "$model" -q --no-peak --json "$json" "${plan_args[@]}" "$@" \
        >"$out/$shape-$name-$round.log" 2>&1 || { echo "failed:"; tail -5 "$out/$shape-$name-$round.log"; }
  done
done
python3 - "$out" "$shape" <<'PY'
import glob, json, os, sys
out, shape = sys.argv[1], sys.argv[2]
print(f"{'run':<36} {'latency tok/s':>14}  depth tok/s; throughput batch:output/decode tok/s")
for path in sorted(glob.glob(os.path.join(out, f"{shape}-*.json"))):
    if path.endswith(".plan.json"):
        continue
    try:
        s = json.load(open(path))["scenarios"]
    except Exception as e:
        print(f"{os.path.basename(path):<36} unreadable: {e}")
        continue
    lat = s.get("latency", {}).get("decode_tok_s")
    depth = " ".join(f"{d['depth']}:{d['decode_tok_s']:.1f}" for d in s.get("depth", []))
    batches = " ".join(f"{t['batch']}:{t['output_tok_s']:.0f}/{t.get('decode_tok_s', float('nan')):.0f}"
                       for t in s.get("throughput", []))
    print(f"{os.path.basename(path)[:-5]:<36} {lat if lat is None else round(lat, 1)!s:>14}  {depth}"
          f"{'; ' + batches if batches else ''}")
PY
