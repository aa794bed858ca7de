#!/usr/bin/env bash
# Installs the Debian packages the fuzz targets (tests/fuzz, make fuzz) build with: clang 14
# and its runtime libraries (libFuzzer, ASan, UBSan), if missing. Runs apt as
# root (or through passwordless sudo); otherwise says what to install and fails.

set -euo pipefail

packages=(clang-14 libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "perfcast: installing missing Debian packages: ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  apt=(apt-get)
elif command -v sudo > /dev/null && sudo -n true 2> /dev/null; then
  apt=(sudo apt-get)
else
  echo "perfcast: missing packages: ${missing[*]}" >&2
  echo "perfcast: install them as root: apt-get install -y ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! "${apt[@]}" install -y -q --no-install-recommends "${missing[@]}"; then
  "${apt[@]}" update -q
  "${apt[@]}" install -y -q --no-install-recommends "${missing[@]}"
fi
