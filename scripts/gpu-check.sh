#!/usr/bin/env bash
# Checks the CUDA backend on a machine with an NVIDIA GPU, from the repository root:
#   1. configure and build the GPU tests (Release, sm_90a only, for build speed);
#   2. ctest -L gpu (kernels against the CPU reference, the engine, the golden end-to-end checks);
#   3. the CLI end to end: `fuselm generate --device cuda` greedy from the goldens' first prompts;
#   4. compute-sanitizer memcheck over the kernel test binaries (then the engine's, while time lasts);
#   5. writes gpu-check.json (commit, GPU, date, test counts, golden numbers) to bench/results/ and,
#      when OUT is set, to $OUT; logs go next to it. A summary table is printed;
#   6. with FUSELM_GPU_BENCH=1, then runs the committed benchmarks (scripts/gpu-bench.sh), whose
#      table of headline numbers comes last.
# Usage: [FUSELM_COMMIT=<hash>] [FUSELM_GPU_CHECK_BUDGET=seconds] [FUSELM_GPU_BENCH=1] bash scripts/gpu-check.sh
# The commit comes from FUSELM_COMMIT, else a .commit file, else git. Memcheck runs only while the
# time budget (default 440 s from the start) lasts, so that the report is always written.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh

build=build-gpu
logs=${OUT:-$build/logs}
mkdir -p "$logs" bench/results
commit=${FUSELM_COMMIT:-$(cat .commit 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo unknown)}
budget=${FUSELM_GPU_CHECK_BUDGET:-440}
export FUSELM_GPU_GOLDEN_DIR=$PWD/$build/golden
rm -rf "$FUSELM_GPU_GOLDEN_DIR" "$build/ctest-gpu.xml"
mkdir -p "$FUSELM_GPU_GOLDEN_DIR"
jobs=$(nproc)
kernel_tests=(embedding rmsnorm rope_kv swiglu residual convert gemm sampling kv_cache skinny_gemm fused_decode fused_engine cuda_engine)

echo "== configure and build"
build_status=ok
mkdir -p "$build"
{
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real \
        -DFUSELM_MODELS_DIR="${FUSELM_MODELS_DIR:-$PWD/../shared/models}" &&
  targets=$(for f in tests/gpu/*_test.cu; do n=$(basename "$f" .cu); echo "gpu_$n"; done) &&
  cmake --build "$build" -j "$jobs" --target $targets
} >"$logs/build.log" 2>&1 || build_status=failed
tail -3 "$logs/build.log"

ctest_status=skipped
memcheck=()
models=${FUSELM_MODELS_DIR:-$PWD/../shared/models}
cli=()
if [ "$build_status" = ok ]; then
  echo "== ctest -L gpu"
  # Four at a time: the tests are small next to the GPU, and each engine caps its KV pool.
  ctest --test-dir "$build" -L gpu -j 4 --timeout 200 --output-on-failure \
        --output-junit "$PWD/$build/ctest-gpu.xml" >"$logs/ctest-gpu.log" 2>&1 && ctest_status=ok || ctest_status=failed
  tail -15 "$logs/ctest-gpu.log"

  echo "== CLI: fuselm generate --device cuda"
  rm -f "$logs/cli.log"
  for spec in tiny-llama2:bf16 tiny-llama2:f16 tiny-llama3:bf16 tiny-llama3:f16; do
    model=${spec%%:*} dtype=${spec#*:}
    [ -f "$models/$model/golden.json" ] || continue
    ids=$(python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['cases'][0]['ids'])))" \
          "$models/$model/golden.json")
    timeout 60 "$build/fuselm" generate -m "$models/$model" --prompt-ids "$ids" -n 24 --temperature 0 --device cuda \
        --dtype "$dtype" --bf16-rope-freqs --json >"$build/cli-$model-$dtype.json" 2>"$build/cli-$model-$dtype.err"
    rc=$?
    cli+=("$model:$dtype:$rc")
    { echo "===== $model $dtype (exit $rc)"; cat "$build/cli-$model-$dtype.json" "$build/cli-$model-$dtype.err"; } >>"$logs/cli.log"
  done

  echo "== compute-sanitizer memcheck"
  rm -f "$logs/memcheck.log"
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/compute-sanitizer/compute-sanitizer)
  for t in "${kernel_tests[@]}"; do
    exe="$build/tests/gpu_${t}_test"
    [ -x "$exe" ] || { memcheck+=("$t:missing"); continue; }
    left=$((budget - SECONDS - 15))
    [ "$left" -ge 20 ] || { memcheck+=("$t:not-run(time)"); continue; }
    filter=()  # the 8192-token step is long under memcheck; the other engine tests cover the same kernels
    [ "$t" = cuda_engine ] && filter=(--gtest_filter=-CudaEngine.DefaultLimitsTakeAFullStep)
    timeout $((left < 120 ? left : 120)) "$sanitizer" --tool memcheck --error-exitcode 99 "$exe" "${filter[@]}" \
        >"$build/memcheck-$t.log" 2>&1
    rc=$?
    { echo "===== memcheck $t (exit $rc)"; tail -40 "$build/memcheck-$t.log"; } >>"$logs/memcheck.log"
    case $rc in
      0) memcheck+=("$t:clean") ;;
      99) memcheck+=("$t:errors") ;;
      124) memcheck+=("$t:timeout") ;;
      126|127) memcheck+=("$t:unavailable") ;;
      *) memcheck+=("$t:test-failed($rc)") ;;
    esac
    echo "  $t: ${memcheck[-1]#*:}"
  done
fi

gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
COMMIT="$commit" GPU="${gpu:-unknown}" BUILD_STATUS="$build_status" CTEST_STATUS="$ctest_status" \
MEMCHECK="${memcheck[*]:-}" CLI="${cli[*]:-}" MODELS="$models" BUILD="$build" JUNIT="$build/ctest-gpu.xml" GOLDEN_DIR="$FUSELM_GPU_GOLDEN_DIR" \
RESULT="bench/results/gpu-check.json" python3 - <<'PY'
import datetime, glob, json, os, xml.etree.ElementTree as ET


def merge(into, more):
    for k, v in more.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            merge(into[k], v)
        else:
            into[k] = v

report = {
    "commit": os.environ["COMMIT"],
    "gpu": os.environ["GPU"],
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "build": os.environ["BUILD_STATUS"],
    "tests": {"passed": 0, "failed": 0, "skipped": 0},
    "failed_tests": [],
    "skipped_tests": [],
    "memcheck": {},
    "golden": {},
}
try:
    for case in ET.parse(os.environ["JUNIT"]).getroot().iter("testcase"):
        name, status = case.get("name"), case.get("status", "run")
        if case.find("failure") is not None or status == "fail":
            report["tests"]["failed"] += 1
            report["failed_tests"].append(name)
        elif case.find("skipped") is not None or status in ("notrun", "disabled"):
            report["tests"]["skipped"] += 1
            report["skipped_tests"].append(name)
        else:
            report["tests"]["passed"] += 1
except (OSError, ET.ParseError) as e:
    report["tests"]["error"] = f"no ctest results: {e}"
for item in os.environ.get("MEMCHECK", "").split():
    test, _, status = item.partition(":")
    report["memcheck"][test] = status
golden = {}
for path in sorted(glob.glob(os.path.join(os.environ["GOLDEN_DIR"], "*.json"))):
    try:
        with open(path) as f:
            merge(golden, json.load(f))
    except (OSError, ValueError) as e:
        report.setdefault("golden_errors", []).append(f"{path}: {e}")
report["golden"] = golden.get("golden", {})
if "ragged64" in golden:
    report["ragged64"] = golden["ragged64"]

# CLI greedy runs against the golden's greedy24 (fp32 argmax loop): the matching prefix.
for item in os.environ.get("CLI", "").split():
    model, dtype, rc = item.split(":")
    entry = {"exit": int(rc)}
    try:
        with open(os.path.join(os.environ["MODELS"], model, "golden.json")) as f:
            want = json.load(f)["cases"][0]["greedy24"]
        with open(os.path.join(os.environ["BUILD"], f"cli-{model}-{dtype}.json")) as f:
            got = json.loads(f.read().strip().splitlines()[-1])["ids"]
        n = 0
        while n < min(len(got), len(want)) and got[n] == want[n]:
            n += 1
        entry.update({"greedy24_prefix_match": n, "generated": len(got)})
    except (OSError, ValueError, KeyError, IndexError) as e:
        entry["error"] = str(e)
    report.setdefault("cli", {})[f"{model} {dtype}"] = entry

text = json.dumps(report, indent=2) + "\n"
paths = [os.environ["RESULT"]] + ([os.path.join(os.environ["OUT"], "gpu-check.json")] if os.environ.get("OUT") else [])
for p in paths:
    with open(p, "w") as f:
        f.write(text)

t = report["tests"]
print()
print(f"gpu-check  commit {report['commit'][:12]}  {report['gpu']}  {report['date']}")
print(f"build {report['build']}   tests passed {t['passed']}  failed {t['failed']}  skipped {t['skipped']}")
for name in report["failed_tests"]:
    print(f"  FAILED  {name}")
for name in report["skipped_tests"]:
    print(f"  skipped {name}")
print("memcheck: " + (", ".join(f"{k} {v}" for k, v in report["memcheck"].items()) or "not run"))
print(f"{'golden':<24}{'held to':<9}{'top1':>7}{'rel_err':>10}   bf16 top1 / rel_err   f16 top1 / rel_err")
for model, g in report["golden"].items():
    if "status" in g:
        print(f"{model:<24}{g['status'][:90]}")
        continue
    if "rel_err" in g:
        def pair(d):
            x = g.get(d, {})
            return f"{x.get('top1_match', float('nan')):.3f} / {x.get('rel_err', float('nan')):.2e}"
        print(f"{model:<24}{g.get('dtype', ''):<9}{g['top1_match']:>7.3f}{g['rel_err']:>10.2e}   "
              f"{pair('bf16'):<20}  {pair('f16')}")
    else:
        parts = ", ".join(f"{k}: {v['greedy_prefix_match']}/{v['of']} greedy ids" for k, v in g.items() if isinstance(v, dict))
        print(f"{model:<24}{parts}")
for model, g in report["golden"].items():
    fd = g.get("fused_decode") if isinstance(g, dict) else None
    if fd:
        parts = "   ".join(f"{d} top1 {x.get('top1_match', float('nan')):.3f} / rel_err {x.get('rel_err', float('nan')):.2e}"
                           for d, x in fd.items() if isinstance(x, dict))
        print(f"{model:<24}one token per step (fused decode graphs): {parts}")
for name, c in report.get("cli", {}).items():
    if "greedy24_prefix_match" in c:
        print(f"cli generate --device cuda {name:<18} exit {c['exit']}  greedy ids = golden greedy24 for the first "
              f"{c['greedy24_prefix_match']} of {c['generated']}")
    else:
        print(f"cli generate --device cuda {name:<18} exit {c['exit']}  {c.get('error', '')[:80]}")
if "ragged64" in report:
    r = report["ragged64"]
    print(f"ragged batch of {r['sequences']}: {r['identical_top1']} sequences with the same top-1 tokens as alone "
          f"over {r['steps']} steps")
PY

if [ "${FUSELM_GPU_BENCH:-0}" = 1 ] && [ "$build_status" = ok ]; then
  echo
  BUILD="$build" FUSELM_COMMIT="$commit" bash scripts/gpu-bench.sh
fi
