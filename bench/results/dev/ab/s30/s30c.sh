#!/usr/bin/env bash
# Session 30, third call: timelines (1B, batch 1) with the late trigger (fold-late-trigger.patch) and the
# one-token warp pipeline's diagnostic marks (warp-pipe-marks.patch: m3 after the post-wait issue, m4
# every warp's first stage, m5 every warp's K loop end), with the rules' plan (O kernel) and the fold.
# Usage (GPU machine, carry .deps .commit .gpu-models): OUT=$OUT bash bench/results/dev/ab/s30/s30c.sh
set -uo pipefail
for p in fold-late-trigger warp-pipe-marks; do patch -p1 < bench/results/dev/ab/s30/$p.patch > /dev/null || exit 1; done
bash scripts/gpu-build.sh fuselm gpu_decode_timeline_test 2>&1 | tail -1
M='synthetic:llama-3.2-1b?vocab=32000'
build-gpu/fuselm plan -m "$M" --json --max-batch 16 --max-prefill-tokens 512 --max-seq-len 1024 > /tmp/r.json || exit 1
python3 -c "import json;p=json.load(open('/tmp/r.json'));p['decode']['o_in_attention']=True;json.dump(p,open('/tmp/f.json','w'))"
for p in r f; do
  FUSELM_TIMELINE_PLAN=/tmp/$p.json FUSELM_TIMELINE_SHAPE=llama-3.2-1b timeout 100 build-gpu/tests/gpu_decode_timeline_test \
      --gtest_also_run_disabled_tests --gtest_filter='*Lab' 2>&1 | grep -E "^\[bench\]|Failure|exception" > $OUT/tl-$p.txt
  grep -v "CTAs an SM" $OUT/tl-$p.txt | grep -E " 1 |Failure|exception|step" | head -9
done
for p in warp-pipe-marks fold-late-trigger; do patch -R -p1 < bench/results/dev/ab/s30/$p.patch > /dev/null; done
