#!/usr/bin/env bash
# Prepares, on a development machine, the ignored folders a run on a remote GPU machine carries:
#   .deps/        headers and pkg-config files of libraries whose runtime (but not -dev) package
#                 the GPU machine has (pcre2, sentencepiece), unpacked from the Debian -dev packages;
#   .gpu-models/  the test models the GPU tests read (FUSELM_MODELS_DIR there).
# Usage: scripts/prepare-gpu-run.sh [MODELS_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
models=${1:-../shared/models}

if [ ! -f .deps/include/pcre2.h ]; then
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download libpcre2-dev libsentencepiece-dev >/dev/null)
  mkdir -p .deps/include .deps/pkgconfig
  for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$tmp/x"; done
  cp "$tmp"/x/usr/include/pcre2.h "$tmp"/x/usr/include/sentencepiece_processor.h .deps/include/
  cp "$tmp"/x/usr/lib/x86_64-linux-gnu/pkgconfig/{libpcre2-8,sentencepiece}.pc .deps/pkgconfig/
  rm -rf "$tmp"
fi

mkdir -p .gpu-models
for rel in tiny-llama2 tiny-llama3 tiny-llama2-gguf/tiny-llama2-bf16.gguf aidreams260K; do
  [ -e "$models/$rel" ] || { echo "prepare-gpu-run: $models/$rel missing, skipped"; continue; }
  mkdir -p ".gpu-models/$(dirname "$rel")"
  cp -r "$models/$rel" ".gpu-models/$(dirname "$rel")/"
done
chmod -R u+w .gpu-models
du -sh .deps .gpu-models
