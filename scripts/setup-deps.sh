#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages the build needs. Idempotent: does nothing when all are present.
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev
          libpcre2-dev libsentencepiece-dev gnuplot-nox)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
echo "setup: installing ${missing[*]}"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
