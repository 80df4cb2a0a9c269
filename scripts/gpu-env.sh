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
# The tree arrives with the file times of the machine it was copied from, which can be older than
# the objects an earlier call built here from a patched copy (a lab script that patches, builds and
# reverts): ninja would keep those objects. So every source whose content differs from what the last build here
# saw is touched (content hashes kept in build-gpu/, which stays between calls).
mkdir -p build-gpu
find src tests bench/lab -type f \( -name '*.cu' -o -name '*.cuh' -o -name '*.h' -o -name '*.cpp' \) -print0 |
    sort -z | xargs -0 md5sum > /tmp/fuselm-source-md5
if [ -f build-gpu/source-md5 ]; then
  diff build-gpu/source-md5 /tmp/fuselm-source-md5 | awk '/^>/ {print $3}' | xargs -r touch
fi
cp /tmp/fuselm-source-md5 build-gpu/source-md5
