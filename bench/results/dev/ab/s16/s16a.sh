#!/usr/bin/env bash
# Session 16, first call: the weight read-order probe, then the headline (every GPU test incl. the
# engine with no gate/up buffer on the sm_90a prefill path, 776b004).
set -uo pipefail
start=$SECONDS
source scripts/gpu-env.sh
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a bench/lab/read_pattern_probe.cu -o /tmp/rpp && /tmp/rpp | tee $OUT/read-pattern.txt
/tmp/rpp 117440512 | tail -36 > $OUT/read-pattern-down.txt
echo "probe $((SECONDS-start)) s"
OUT=$OUT bash scripts/gpu-headline.sh 2>&1 | tail -32
echo "total $((SECONDS-start)) s"
