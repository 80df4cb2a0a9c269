#!/usr/bin/env bash
# A/B of code changes in one GPU call: builds the tree as it is (arm `base`), then each arm's patch
# on top of it (applied, built, its GPU tests run, reverted), and runs scripts/gpu-ab.sh over every
# build in turns. For changes no plan edit or switch can select.
# Usage: OUT=$OUT bash scripts/gpu-ab-patch.sh NAME=PATCH... [-- RUN...]
#   NAME=PATCH  an arm: a `patch -p1` file against the tree
#   RUN         SHAPE:ROUNDS[:b16]: the latency scenario at batch 1, or with :b16 throughput at
#               batch 16 (default: llama-3.2-1b:3 llama-3.1-8b:2)
# Settings: AB_TESTS="fused_engine fused_decode" (tests/gpu/<name>_test.cu run on every arm's build),
# AB_TEST_FILTER=NAME:FILTER (a gtest filter for one of them, e.g. attention:'*Decode*'),
# AB_DRY_RUN=1 prints what would be built and run, applying and reverting the patches only.
# Every arm's patch must apply to the tree and revert cleanly: the script stops at the first that
# does not. The JSON of the runs goes to $OUT/ab.tgz (and stays in bench/results/dev/ab/).
#   e.g. OUT=$OUT bash scripts/gpu-ab-patch.sh claim=lab/claim.patch -- llama-3.2-1b:3 llama-3.1-8b:2:b16
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
export FUSELM_COMMIT=${FUSELM_COMMIT:-$(cat .commit 2>/dev/null || echo unknown)}
dry=${AB_DRY_RUN:-0}
arms=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  [[ $1 == *=* ]] || { echo "gpu-ab-patch: '$1' is not NAME=PATCH" >&2; exit 2; }
  arms+=("$1")
  shift
done
[ "${1:-}" = "--" ] && shift
runs=("$@")
[ ${#runs[@]} -eq 0 ] && runs=(llama-3.2-1b:3 llama-3.1-8b:2)
[ ${#arms[@]} -eq 0 ] && { echo "gpu-ab-patch: no arm given" >&2; exit 2; }
tests=(${AB_TESTS:-})

run() {  # echoes the command in a dry run, runs it otherwise
  if [ "$dry" = 1 ]; then echo "+ $*"; else "$@"; fi
}

build_to() {  # DEST [TEST...]: builds fuselm (and the named GPU tests), copies fuselm to DEST
  local dest=$1 targets=(fuselm)
  shift
  for t in "$@"; do targets+=("gpu_${t}_test"); done
  run bash scripts/gpu-build.sh "${targets[@]}" || return 1
  run cp build-gpu/fuselm "$dest"
}

run_tests() {  # TEST...: each test's pass/fail lines
  for t in "$@"; do
    local filter=()
    [[ ${AB_TEST_FILTER:-} == "$t":* ]] && filter=(--gtest_filter="${AB_TEST_FILTER#*:}")
    echo "== $t"
    if [ "$dry" = 1 ]; then
      echo "+ build-gpu/tests/gpu_${t}_test ${filter[*]}"
    else
      timeout 150 "build-gpu/tests/gpu_${t}_test" "${filter[@]}" 2>&1 |
          grep -E "^\[  (FAILED|PASSED) |Failure" -A3 | head -12
    fi
  done
}

# Every patch is checked before the first build, so that a bad one costs no build time.
for arm in "${arms[@]}"; do
  patch_file=${arm#*=}
  [ -f "$patch_file" ] || { echo "gpu-ab-patch: no patch file $patch_file" >&2; exit 2; }
  patch -p1 --forward --dry-run < "$patch_file" > /dev/null ||
      { echo "gpu-ab-patch: $patch_file does not apply to the tree" >&2; exit 2; }
done
build_to /tmp/fuselm-base || exit 1
configs=("base:AB_BIN=/tmp/fuselm-base")
for arm in "${arms[@]}"; do
  name=${arm%%=*} patch_file=${arm#*=}
  patch -p1 --forward --no-backup-if-mismatch < "$patch_file" > /dev/null ||
      { echo "gpu-ab-patch: $patch_file does not apply" >&2; exit 1; }
  echo "== arm $name ($patch_file)"
  build_to "/tmp/fuselm-$name" "${tests[@]}"
  built=$?
  [ $built -eq 0 ] && run_tests "${tests[@]}"
  patch -R -p1 --no-backup-if-mismatch < "$patch_file" > /dev/null || { echo "gpu-ab-patch: $patch_file does not revert" >&2; exit 1; }
  [ $built -eq 0 ] || { echo "gpu-ab-patch: arm $name does not build" >&2; exit 1; }
  configs+=("$name:AB_BIN=/tmp/fuselm-$name")
done
echo "builds and tests $((SECONDS - start)) s"

run rm -f bench/results/dev/ab/*.json
for r in "${runs[@]}"; do
  IFS=: read -r shape rounds mode <<< "$r"
  if [ "${mode:-}" = b16 ]; then
    cfgs=()
    for c in "${configs[@]}"; do cfgs+=("${c%%:*}16:${c#*:}"); done
    run timeout 200 bash scripts/gpu-ab.sh "$shape" "${rounds:-2}" "${cfgs[@]}" -- --device cuda --dtype bf16 \
        --scenario throughput --batches 16 --reps 2
  else
    run timeout 200 bash scripts/gpu-ab.sh "$shape" "${rounds:-2}" "${configs[@]}" -- --device cuda --dtype bf16 \
        --scenario latency --reps 2
  fi
done
echo "A/B $((SECONDS - start)) s"
if [ -n "${OUT:-}" ] && [ "$dry" != 1 ]; then
  mkdir -p "$OUT/ab" && cp bench/results/dev/ab/*.json "$OUT/ab/" 2>/dev/null
  (cd "$OUT" && tar czf ab.tgz ab && rm -rf ab)
fi
