#!/usr/bin/env bash
# Sourced on the GPU machine before building: installs the carried headers of pcre2 and
# sentencepiece (whose runtime libraries are already there) so the normal build finds them.
if [ ! -f /usr/include/pcre2.h ] && [ -d .deps/include ]; then
  cp --update=none .deps/include/* /usr/include/
  mkdir -p /usr/lib/x86_64-linux-gnu/pkgconfig
  cp --update=none .deps/pkgconfig/*.pc /usr/lib/x86_64-linux-gnu/pkgconfig/
  for lib in libpcre2-8 libsentencepiece; do
    real=$(ls /usr/lib/x86_64-linux-gnu/$lib.so.* 2>/dev/null | head -1)
    [ -n "$real" ] && ln -sf "$real" /usr/lib/x86_64-linux-gnu/$lib.so
  done
fi
[ -d .gpu-models ] && export FUSELM_MODELS_DIR=$PWD/.gpu-models
export PATH=$PATH:/usr/local/cuda/bin
