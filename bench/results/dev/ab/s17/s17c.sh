#!/usr/bin/env bash
# Session 17 (c): the headline with the 8B gate/up on rt2_w8_k4_cta (rules.cpp), after s17b's arm w.
set -uo pipefail
start=$SECONDS
OUT=$OUT bash scripts/gpu-headline.sh 2>&1 | tail -32
echo "total $((SECONDS-start)) s"
