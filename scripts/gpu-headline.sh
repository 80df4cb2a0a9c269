#!/usr/bin/env bash
# The fused decode issue's headline in one GPU call (~200 s on an H200): every GPU test
# (scripts/gpu-check.sh, memcheck skipped), the decode step's kernel timeline, `--compare
# baseline,fused` latency on both synthetic shapes and batch-16 throughput, printed as a short table.
# FUSELM_HEADLINE_TESTS=0 leaves out the tests (when they ran on the same code in an earlier call).
# Results land in bench/results/ (the compare JSON/Markdown, dev/decode-timeline/COMMIT.txt,
# dev/b16-SHAPE-COMMIT.json) and, when OUT is set, in $OUT/results.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.."
# The results name the commit measured (the copy of the tree on the GPU machine may carry a stale .git).
export FUSELM_COMMIT=${FUSELM_COMMIT:-$(cat .commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)}
C=$FUSELM_COMMIT
start=$SECONDS
if [ "${FUSELM_HEADLINE_TESTS:-1}" = 0 ]; then
  # Only the measurements (the GPU tests of the same code ran in an earlier call).
  bash scripts/gpu-build.sh fuselm gpu_decode_timeline_test || exit 1
else
  FUSELM_GPU_CHECK_BUDGET=0 bash scripts/gpu-check.sh 2>&1 | tail -30
  echo "check $((SECONDS - start)) s"
fi
source scripts/gpu-env.sh
cmake --build build-gpu -j "$(nproc)" --target fuselm gpu_decode_timeline_test > /tmp/headline-build.log 2>&1 ||
    tail -20 /tmp/headline-build.log
R=bench/results/dev
bash scripts/gpu-timeline.sh $R/decode-timeline/$C.txt
summary=()
for s in llama-3.1-8b llama-3.2-1b; do
  model="synthetic:$s?vocab=32000"
  timeout 200 build-gpu/fuselm bench -m "$model" --device cuda --dtype bf16 --scenario latency \
      --compare baseline,fused --reps 3 -q --json bench/results/h200-$s-compare.json \
      --markdown bench/results/h200-$s-compare.md > /tmp/headline-compare.txt 2>&1 || tail -5 /tmp/headline-compare.txt
  timeout 100 build-gpu/fuselm bench -m "$model" --device cuda --dtype bf16 --scenario throughput \
      --batches 16 --reps 3 -q --no-peak --json $R/b16-$s-$C.json > /tmp/headline-b16.txt 2>&1 || tail -5 /tmp/headline-b16.txt
  summary+=("$(python3 - "$s" bench/results/h200-$s-compare.json $R/b16-$s-$C.json <<'PY'
import json, sys
shape, compare, b16 = sys.argv[1:4]
try:
    d = json.load(open(compare)); c = d['compare']
    peak = d.get('peak_bandwidth') or d.get('environment', {}).get('peak_bandwidth') or {}
    line = (f"{shape:<13} fused {c['fused']['scenarios']['latency']['decode_tok_s']:8.1f}  baseline "
            f"{c['baseline']['scenarios']['latency']['decode_tok_s']:7.1f}  speedup {c['speedup']['decode']:.3f}  "
            f"copy/memcpy {peak.get('copy_kernel_vs_memcpy', float('nan')):.4f}")
except Exception as e:
    line = f"{shape:<13} compare unreadable: {e}"
try:
    line += f"  b16 output {json.load(open(b16))['scenarios']['throughput'][0]['output_tok_s']:8.1f} tok/s"
except Exception as e:
    line += f"  b16 unreadable: {e}"
print(line)
PY
)")
done
echo "total $((SECONDS - start)) s"
printf '%s\n' "${summary[@]}"
[ -n "${OUT:-}" ] && tar czf "$OUT/results.tar.gz" bench/results
true
